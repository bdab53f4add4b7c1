package store

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// migrations are the schema's history, oldest first: migration i takes a
// database from version i to i+1. Append only; never edit one that has
// shipped, since databases out there already ran it.
//
// The SQL is written once for both dialects. The few words they spell
// differently are tokens that expand per dialect (see dialectWords).
// Times are BIGINT microseconds since the Unix epoch, UTC: one
// representation both drivers read back exactly and that sorts as numbers.
// JSON is TEXT, kept byte for byte (Postgres' jsonb would reorder keys, and
// a transcript must come back as it went in).
var migrations = [][]string{
	// 1: the tables.
	{
		`CREATE TABLE deputy_instances (
			id          TEXT PRIMARY KEY,
			parent      TEXT REFERENCES deputy_instances (id),
			root        TEXT NOT NULL,
			depth       INTEGER NOT NULL,
			type        TEXT NOT NULL DEFAULT '',
			definition  TEXT,
			task        TEXT NOT NULL DEFAULT '',
			mode        TEXT NOT NULL DEFAULT '',
			model       TEXT NOT NULL DEFAULT '',
			state       TEXT NOT NULL,
			stop_reason TEXT NOT NULL DEFAULT '',
			incomplete  {{bool}} NOT NULL DEFAULT {{false}},
			report      TEXT NOT NULL DEFAULT '',
			error       TEXT NOT NULL DEFAULT '',
			usage       TEXT NOT NULL DEFAULT '{}',
			cost        {{real}},
			turns       INTEGER NOT NULL DEFAULT 0,
			tool_calls  INTEGER NOT NULL DEFAULT 0,
			artifacts   TEXT,
			workflow_id TEXT NOT NULL DEFAULT '',
			created_at  BIGINT NOT NULL,
			updated_at  BIGINT NOT NULL,
			ended_at    BIGINT
		)`,
		`CREATE TABLE deputy_transitions (
			instance_id TEXT NOT NULL REFERENCES deputy_instances (id),
			seq         INTEGER NOT NULL,
			from_state  TEXT NOT NULL,
			to_state    TEXT NOT NULL,
			cause       TEXT NOT NULL DEFAULT '',
			at          BIGINT NOT NULL,
			PRIMARY KEY (instance_id, seq)
		)`,
		`CREATE TABLE deputy_runs (
			id          {{id}},
			instance_id TEXT NOT NULL REFERENCES deputy_instances (id),
			n           INTEGER NOT NULL,
			workflow_id TEXT,
			started_at  BIGINT NOT NULL,
			ended_at    BIGINT,
			outcome     TEXT NOT NULL DEFAULT '',
			UNIQUE (instance_id, n),
			UNIQUE (instance_id, workflow_id)
		)`,
		`CREATE TABLE deputy_messages (
			instance_id TEXT NOT NULL REFERENCES deputy_instances (id),
			seq         INTEGER NOT NULL,
			turn        INTEGER NOT NULL,
			role        TEXT NOT NULL,
			content     TEXT NOT NULL,
			at          BIGINT NOT NULL,
			PRIMARY KEY (instance_id, seq)
		)`,
		`CREATE TABLE deputy_compactions (
			instance_id TEXT NOT NULL REFERENCES deputy_instances (id),
			turn        INTEGER NOT NULL,
			through_seq INTEGER NOT NULL,
			summary     TEXT NOT NULL,
			usage       TEXT NOT NULL DEFAULT '{}',
			at          BIGINT NOT NULL,
			PRIMARY KEY (instance_id, turn)
		)`,
		`CREATE TABLE deputy_attempts (
			instance_id TEXT NOT NULL REFERENCES deputy_instances (id),
			turn        INTEGER NOT NULL,
			n           INTEGER NOT NULL,
			provider    TEXT NOT NULL DEFAULT '',
			model       TEXT NOT NULL DEFAULT '',
			status      INTEGER NOT NULL DEFAULT 0,
			request_id  TEXT NOT NULL DEFAULT '',
			reason      TEXT NOT NULL DEFAULT '',
			error       TEXT NOT NULL DEFAULT '',
			retry       {{bool}} NOT NULL DEFAULT {{false}},
			discarded   {{bool}} NOT NULL DEFAULT {{false}},
			wait_ms     BIGINT NOT NULL DEFAULT 0,
			latency_ms  BIGINT NOT NULL DEFAULT 0,
			at          BIGINT NOT NULL,
			PRIMARY KEY (instance_id, turn, n)
		)`,
		`CREATE TABLE deputy_mailbox (
			id          {{id}},
			instance_id TEXT NOT NULL REFERENCES deputy_instances (id),
			sender      TEXT NOT NULL DEFAULT '',
			kind        TEXT NOT NULL DEFAULT '',
			body        TEXT NOT NULL DEFAULT '',
			dedup_key   TEXT,
			created_at  BIGINT NOT NULL,
			consumed_at BIGINT,
			UNIQUE (instance_id, dedup_key)
		)`,
		`CREATE TABLE deputy_definitions (
			name        TEXT PRIMARY KEY,
			source      TEXT NOT NULL DEFAULT '',
			definition  TEXT NOT NULL,
			updated_at  BIGINT NOT NULL
		)`,
		`CREATE TABLE deputy_events (
			id          {{id}},
			instance_id TEXT NOT NULL REFERENCES deputy_instances (id),
			kind        TEXT NOT NULL,
			data        TEXT,
			at          BIGINT NOT NULL
		)`,
	},
	// 2: indexes for the list queries (children of a parent, a tree, the
	// active instances, an instance's pending mail and its event feed).
	{
		`CREATE INDEX deputy_instances_parent ON deputy_instances (parent)`,
		`CREATE INDEX deputy_instances_root ON deputy_instances (root)`,
		`CREATE INDEX deputy_instances_state ON deputy_instances (state)`,
		`CREATE INDEX deputy_mailbox_pending ON deputy_mailbox (instance_id, id) WHERE consumed_at IS NULL`,
		`CREATE INDEX deputy_events_instance ON deputy_events (instance_id, id)`,
	},
	// 3: the workers and their leases (several processes on one database).
	{
		`CREATE TABLE deputy_workers (
			id          TEXT PRIMARY KEY,
			host        TEXT NOT NULL DEFAULT '',
			pid         INTEGER NOT NULL DEFAULT 0,
			version     TEXT NOT NULL DEFAULT '',
			state       TEXT NOT NULL,
			started_at  BIGINT NOT NULL,
			renewed_at  BIGINT NOT NULL,
			lease_until BIGINT NOT NULL,
			load        INTEGER NOT NULL DEFAULT 0,
			claimed_by  TEXT NOT NULL DEFAULT '',
			ended_at    BIGINT
		)`,
	},
	// 4: every commit of events announced on the deputy_events channel
	// (Postgres; see listen.go).
	{
		postgresOnly + `CREATE FUNCTION deputy_events_notify() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			PERFORM pg_notify('deputy_events', '');
			RETURN NULL;
		END $$`,
		postgresOnly + `CREATE TRIGGER deputy_events_notify AFTER INSERT ON deputy_events
			FOR EACH STATEMENT EXECUTE FUNCTION deputy_events_notify()`,
	},
	// 5: an instance's place in creation order. created_at cannot order
	// children spawned in one turn (they share a microsecond, or a fake
	// clock's instant) and ids are random, so a tree listed its siblings
	// in an order that did not follow their spawning. Existing rows are
	// numbered in the order they were listed by before (created_at, id);
	// new rows take the next number as they are inserted (insertSeq).
	{
		`ALTER TABLE deputy_instances ADD COLUMN created_seq BIGINT`,
		`UPDATE deputy_instances SET created_seq = r.n
			FROM (SELECT id, ROW_NUMBER() OVER (ORDER BY created_at, id) AS n FROM deputy_instances) AS r
			WHERE r.id = deputy_instances.id`,
		// SQLite's insertSeq reads MAX(created_seq) on every insert: with
		// the index that is one probe, not a scan of every instance kept.
		`CREATE INDEX deputy_instances_created_seq_idx ON deputy_instances (created_seq)`,
		postgresOnly + `CREATE SEQUENCE deputy_instances_created_seq`,
		postgresOnly + `SELECT setval('deputy_instances_created_seq', (SELECT COALESCE(MAX(created_seq), 0) + 1 FROM deputy_instances), false)`,
	},
	// 6: each tree's spending kept as a running total, one row per root,
	// so a run's start reads one row instead of every instance of its
	// tree (a 1,000-task fan-out spent a third of its CPU summing). An
	// instance's tokens (its usage's Total) become a column, so the
	// triggers that keep the total need no JSON: every write of an
	// instance's tokens or cost adds the difference to its root's row in
	// the same statement, hence the same transaction, whoever writes it.
	// Existing rows are back-filled; a usage that does not decode counts 0
	// (reading that instance fails as before; opening the database must
	// not).
	{
		`ALTER TABLE deputy_instances ADD COLUMN tokens BIGINT NOT NULL DEFAULT 0`,
		sqliteOnly + `UPDATE deputy_instances SET tokens = CASE WHEN json_valid(usage) THEN
			COALESCE(json_extract(usage, '$.input_tokens'), 0) + COALESCE(json_extract(usage, '$.output_tokens'), 0) +
			COALESCE(json_extract(usage, '$.cache_read_tokens'), 0) + COALESCE(json_extract(usage, '$.cache_write_tokens'), 0)
			ELSE 0 END`,
		postgresOnly + `CREATE FUNCTION deputy_usage_tokens(u TEXT) RETURNS BIGINT LANGUAGE plpgsql AS $$
		BEGIN
			RETURN COALESCE((u::json->>'input_tokens')::BIGINT, 0) + COALESCE((u::json->>'output_tokens')::BIGINT, 0) +
				COALESCE((u::json->>'cache_read_tokens')::BIGINT, 0) + COALESCE((u::json->>'cache_write_tokens')::BIGINT, 0);
		EXCEPTION WHEN others THEN
			RETURN 0;
		END $$`,
		postgresOnly + `UPDATE deputy_instances SET tokens = deputy_usage_tokens(usage)`,
		postgresOnly + `DROP FUNCTION deputy_usage_tokens(TEXT)`,
		`CREATE TABLE deputy_tree_totals (
			root   TEXT PRIMARY KEY,
			tokens BIGINT NOT NULL DEFAULT 0,
			usd    {{real}} NOT NULL DEFAULT 0
		)`,
		`INSERT INTO deputy_tree_totals (root, tokens, usd)
			SELECT root, SUM(tokens), COALESCE(SUM(cost), 0) FROM deputy_instances GROUP BY root`,
		// SQLite: a trigger per event. A child's creation (nothing spent
		// yet) touches no total; a root's makes its row.
		sqliteOnly + `CREATE TRIGGER deputy_tree_totals_insert AFTER INSERT ON deputy_instances
			WHEN NEW.parent IS NULL OR NEW.tokens <> 0 OR NEW.cost IS NOT NULL
			BEGIN
				INSERT INTO deputy_tree_totals (root, tokens, usd) VALUES (NEW.root, NEW.tokens, COALESCE(NEW.cost, 0))
					ON CONFLICT (root) DO UPDATE SET tokens = tokens + excluded.tokens, usd = usd + excluded.usd;
			END`,
		sqliteOnly + `CREATE TRIGGER deputy_tree_totals_update AFTER UPDATE OF tokens, cost ON deputy_instances
			WHEN OLD.tokens <> NEW.tokens OR OLD.cost IS NOT NEW.cost
			BEGIN
				UPDATE deputy_tree_totals SET tokens = tokens + NEW.tokens - OLD.tokens,
					usd = usd + COALESCE(NEW.cost, 0) - COALESCE(OLD.cost, 0) WHERE root = NEW.root;
			END`,
		sqliteOnly + `CREATE TRIGGER deputy_tree_totals_delete AFTER DELETE ON deputy_instances
			BEGIN
				DELETE FROM deputy_tree_totals WHERE root = OLD.id;
				UPDATE deputy_tree_totals SET tokens = tokens - OLD.tokens, usd = usd - COALESCE(OLD.cost, 0)
					WHERE root = OLD.root AND OLD.parent IS NOT NULL AND (OLD.tokens <> 0 OR OLD.cost IS NOT NULL);
			END`,
		postgresOnly + `CREATE FUNCTION deputy_tree_total() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF TG_OP = 'INSERT' THEN
				INSERT INTO deputy_tree_totals (root, tokens, usd) VALUES (NEW.root, NEW.tokens, COALESCE(NEW.cost, 0))
					ON CONFLICT (root) DO UPDATE SET tokens = deputy_tree_totals.tokens + excluded.tokens,
						usd = deputy_tree_totals.usd + excluded.usd;
			ELSIF TG_OP = 'UPDATE' THEN
				UPDATE deputy_tree_totals SET tokens = tokens + NEW.tokens - OLD.tokens,
					usd = usd + COALESCE(NEW.cost, 0) - COALESCE(OLD.cost, 0) WHERE root = NEW.root;
			ELSIF OLD.parent IS NULL THEN
				DELETE FROM deputy_tree_totals WHERE root = OLD.id;
			ELSE
				UPDATE deputy_tree_totals SET tokens = tokens - OLD.tokens, usd = usd - COALESCE(OLD.cost, 0)
					WHERE root = OLD.root;
			END IF;
			RETURN NULL;
		END $$`,
		postgresOnly + `CREATE TRIGGER deputy_tree_totals_insert AFTER INSERT ON deputy_instances FOR EACH ROW
			WHEN (NEW.parent IS NULL OR NEW.tokens <> 0 OR NEW.cost IS NOT NULL) EXECUTE FUNCTION deputy_tree_total()`,
		postgresOnly + `CREATE TRIGGER deputy_tree_totals_update AFTER UPDATE OF tokens, cost ON deputy_instances FOR EACH ROW
			WHEN (OLD.tokens <> NEW.tokens OR OLD.cost IS DISTINCT FROM NEW.cost) EXECUTE FUNCTION deputy_tree_total()`,
		postgresOnly + `CREATE TRIGGER deputy_tree_totals_delete AFTER DELETE ON deputy_instances FOR EACH ROW
			WHEN (OLD.parent IS NULL OR OLD.tokens <> 0 OR OLD.cost IS NOT NULL) EXECUTE FUNCTION deputy_tree_total()`,
	},
}

// postgresOnly begins a migration statement that SQLite skips, and
// sqliteOnly one that Postgres skips.
const (
	postgresOnly = "-- postgres only\n"
	sqliteOnly   = "-- sqlite only\n"
)

// dialectWords expands the tokens of the migrations.
var dialectWords = map[Dialect]*strings.Replacer{
	SQLite: strings.NewReplacer(
		"{{id}}", "INTEGER PRIMARY KEY AUTOINCREMENT",
		"{{bool}}", "INTEGER",
		"{{false}}", "0",
		"{{real}}", "REAL",
	),
	Postgres: strings.NewReplacer(
		"{{id}}", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY",
		"{{bool}}", "BOOLEAN",
		"{{false}}", "FALSE",
		"{{real}}", "DOUBLE PRECISION",
	),
}

// LatestSchemaVersion is the schema version this binary migrates to.
func LatestSchemaVersion() int { return len(migrations) }

// pgMigrationLock keys the advisory lock that keeps two processes opening
// one Postgres database from migrating it at once ("deputy" in ASCII).
const pgMigrationLock = 0x646570757479

// pgSchemaLock keys SchemaLock ("deputz"): not the migration lock, so a
// store opening meanwhile does not wait for another program's migration.
const pgSchemaLock = pgMigrationLock + 1

// SchemaLock runs fn while no other process runs its own under it (on
// Postgres a session advisory lock on a connection of its own; SQLite
// serializes schema changes by itself). Programs that keep tables of
// their own beside deputy's migrate them under it: DBOS's own migrations
// are not safe when several workers start at once on a new database.
func (s *Store) SchemaLock(ctx context.Context, fn func() error) error {
	if s.dialect != Postgres {
		return fn()
	}
	// A session lock on a connection of its own, taken by trying: no
	// transaction stays open while fn runs (DBOS builds indexes
	// CONCURRENTLY, which waits for every open transaction, this one's
	// too), and no lock_timeout cuts the wait short while another
	// process migrates.
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("schema lock: %w", err)
	}
	defer conn.Close()
	for {
		var ok bool
		if err := conn.QueryRowContext(ctx, fmt.Sprintf("SELECT pg_try_advisory_lock(%d)", pgSchemaLock)).Scan(&ok); err != nil {
			return fmt.Errorf("take the schema lock: %w", err)
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("take the schema lock: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), fmt.Sprintf("SELECT pg_advisory_unlock(%d)", pgSchemaLock))
	}()
	return fn()
}

// migrate brings the schema to version target (0: the latest), all in one
// transaction: a failed migration leaves the database as it was.
func (s *Store) migrate(ctx context.Context, target int) error {
	if target == 0 {
		target = LatestSchemaVersion()
	}
	return s.tx(ctx, func(q querier) error {
		if s.dialect == Postgres {
			// The session's lock_timeout may come from the URL; the
			// migration waits for the busy timeout, as on SQLite.
			if _, err := q.exec(ctx, fmt.Sprintf("SET LOCAL lock_timeout = %d", s.busy.Milliseconds())); err != nil {
				return fmt.Errorf("set lock_timeout: %w", err)
			}
			if _, err := q.exec(ctx, fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", pgMigrationLock)); err != nil {
				return fmt.Errorf("take the migration lock: %w", err)
			}
		}
		if _, err := q.exec(ctx, `CREATE TABLE IF NOT EXISTS deputy_schema (
			version    INTEGER PRIMARY KEY,
			applied_at BIGINT NOT NULL
		)`); err != nil {
			return fmt.Errorf("create deputy_schema: %w", err)
		}
		var cur int
		if err := q.row(ctx, `SELECT COALESCE(MAX(version), 0) FROM deputy_schema`).Scan(&cur); err != nil {
			return fmt.Errorf("read schema version: %w", err)
		}
		if cur > LatestSchemaVersion() {
			return fmt.Errorf("%w: the database is at version %d, this deputy knows up to %d; nothing was changed", ErrNewerSchema, cur, LatestSchemaVersion())
		}
		words := dialectWords[s.dialect]
		for v := cur + 1; v <= target; v++ {
			for i, stmt := range migrations[v-1] {
				if strings.HasPrefix(stmt, postgresOnly) && s.dialect != Postgres ||
					strings.HasPrefix(stmt, sqliteOnly) && s.dialect != SQLite {
					continue
				}
				if _, err := q.exec(ctx, words.Replace(stmt)); err != nil {
					return fmt.Errorf("migration %d, statement %d: %w", v, i+1, err)
				}
			}
			if _, err := q.exec(ctx, `INSERT INTO deputy_schema (version, applied_at) VALUES (?, ?)`, v, s.now().UnixMicro()); err != nil {
				return fmt.Errorf("record migration %d: %w", v, err)
			}
		}
		return nil
	})
}

// SchemaVersion reads the database's schema version.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.q().row(ctx, `SELECT COALESCE(MAX(version), 0) FROM deputy_schema`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}
