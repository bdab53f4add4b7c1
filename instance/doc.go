// Package instance is deputy's one record of an agent instance (Record) and
// its one state machine (State, CanMove, TransitionError). The store keeps
// records, the in-memory runtime (agent) builds them, the durable engine
// checkpoints them, and the HTTP API and the CLI's --json print them: one
// shape and one vocabulary, so nothing is copied field by field between
// them and no state is a bare string cast from one package's type to
// another's.
//
// The decisions, and why:
//
//   - A leaf package (the standard library and llm only): agent, the
//     runtime that needs no database, must not link the store's SQLite and
//     Postgres drivers to name an instance or a state.
//   - The JSON names are the HTTP API's (docs/api.md), which were the
//     store's. The CLI's --json, which had names of its own ("result" for
//     the report, "report_chars"), prints the same record now: a script
//     reads `deputy show --json` and GET /api/instances/{id} alike. The
//     CLI's promise that id, parent, type, state, usage and the report are
//     on every object holds for both; a root's parent is "" (the CLI
//     printed null), since a MarshalJSON to print null would be taken over
//     by every view that embeds the record.
//   - The definition snapshot stays in the record's JSON, since the durable
//     engine checkpoints records as JSON and a replay needs it; View drops
//     it for display, and both the API and the CLI print View's record.
//   - Question (the open question) and Description (the spawn call's) have
//     no store column: whoever shows a record fills Question in from the
//     mailbox; Description is the in-memory runtime's.
//   - No Duration or ReportChars field: both follow from what the record
//     holds (Duration from the times, the report's length from Report), and
//     a field kept beside them could disagree.
//   - Artifacts are a list of paths, decoded by the store as it reads a row.
//     A row whose list does not decode is not an error: the record comes
//     back with no artifacts and a Problems entry saying so, since an
//     error would keep a child's end from reaching its parent (which may
//     be waiting for it) and a list of instances from showing the others;
//     the relay (agent.RelayOf) passes the problem on.
//   - A run that stops to wait (loop.StopSuspended) is no state of its own:
//     it leaves its instance asking (its last turn asked its parent) or
//     paused (its inbox said pause), as agent tells them apart from the
//     run's result; the durable engine then settles it from its store (a
//     cancel that came meanwhile ends it). Waiting reports either.
//   - A fan-out task that never ran because a task it depends on failed
//     has no instance, so no state: agent.FanResult says Skipped (why) and
//     leaves its State empty.
package instance
