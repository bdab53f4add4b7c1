package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/deputy-run/deputy/llm"
)

// AppendMessages adds msgs to instance id's transcript at sequence numbers
// firstSeq, firstSeq+1, ..., all in one transaction, recording the turn
// they belong to. Sequence numbers start at 0 and leave no gaps, so a
// message's seq is its index in Transcript.
//
// The transcript is append-only and keeps the original turns even after a
// compaction (see RecordCompaction). Appending a seq that is already stored
// with the same turn and content is a no-op, so the runtime may repeat an
// append after a crash; different content is ErrConflict, and so is a
// firstSeq past the end (a gap). New messages for an ended instance are
// ErrTerminal.
func (s *Store) AppendMessages(ctx context.Context, id string, turn, firstSeq int, msgs []llm.Message) error {
	return s.Deliver(ctx, id, turn, firstSeq, msgs, nil)
}

// Deliver appends msgs like AppendMessages and, in the same transaction,
// marks the mail mailIDs consumed: mail that a run puts into a transcript
// (an answer, notes) is consumed exactly when it lands there, so a crash
// can neither lose it nor deliver it twice. Mail consumed already (a
// repeat) is left as it is.
func (s *Store) Deliver(ctx context.Context, id string, turn, firstSeq int, msgs []llm.Message, mailIDs []int64) error {
	return s.AppendWith(ctx, id, turn, firstSeq, msgs, With{Mail: mailIDs})
}

// With is what an append brings along into its transaction.
type With struct {
	// Mail is consumed (Deliver).
	Mail []int64
	// Progress, when set, is the instance's running totals with the model
	// call that produced the message, written with a "progress" event.
	Progress *Progress
	// Events are added to the instance's feed after the messages (the
	// tool calls a message makes, the results it carries).
	Events []NewEvent
}

// NewEvent is an event to write: its kind and data (JSON).
type NewEvent struct {
	Kind string
	Data json.RawMessage
}

// AppendWith appends msgs like AppendMessages and, in the same
// transaction, does what w asks. Progress and events are written only
// when the append stores something new: a repeat after a crash (the same
// messages again) announces nothing twice. Riding on the
// append's transaction, they cost a turn no transaction of their own.
func (s *Store) AppendWith(ctx context.Context, id string, turn, firstSeq int, msgs []llm.Message, w With) error {
	for _, e := range w.Events {
		if err := checkEvent(e.Kind, e.Data); err != nil {
			return fmt.Errorf("append to %s: %w", id, err)
		}
	}
	for _, e := range w.Events {
		if e.Kind == "" || len(e.Data) > 0 && !json.Valid(e.Data) {
			return fmt.Errorf("append messages to %s: event %q without a kind or with invalid JSON", id, e.Kind)
		}
	}
	if firstSeq < 0 {
		return fmt.Errorf("append messages to %s: negative seq %d", id, firstSeq)
	}
	content := make([]string, len(msgs))
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("append messages to %s: message %d: %w", id, firstSeq+i, err)
		}
		content[i] = string(b)
	}
	err := s.tx(ctx, func(q querier) error {
		st, err := lockState(ctx, q, id)
		if err != nil {
			return err
		}
		next, err := messageCount(ctx, q, id)
		if err != nil {
			return err
		}
		if firstSeq > next {
			return fmt.Errorf("%w: seq %d would leave a gap after the %d messages stored", ErrConflict, firstSeq, next)
		}
		// The part already stored must match.
		rows, err := q.query(ctx, `SELECT seq, turn, content FROM deputy_messages
			WHERE instance_id = ? AND seq >= ? AND seq < ? ORDER BY seq`, id, firstSeq, firstSeq+len(msgs))
		if err != nil {
			return fmt.Errorf("read stored messages: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var seq, t int
			var c string
			if err := rows.Scan(&seq, &t, &c); err != nil {
				return fmt.Errorf("read stored messages: %w", err)
			}
			if t != turn || c != content[seq-firstSeq] {
				return fmt.Errorf("%w: message %d is stored with a different turn or content", ErrConflict, seq)
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read stored messages: %w", err)
		}
		rows.Close()
		if firstSeq+len(msgs) > next && st.Terminal() {
			return fmt.Errorf("%w (%s)", ErrTerminal, st)
		}
		at := s.now().UnixMicro()
		for seq := next; seq < firstSeq+len(msgs); seq++ {
			_, err := q.exec(ctx, `INSERT INTO deputy_messages (instance_id, seq, turn, role, content, at)
				VALUES (?, ?, ?, ?, ?, ?)`, id, seq, turn, string(msgs[seq-firstSeq].Role), content[seq-firstSeq], at)
			if err != nil {
				return fmt.Errorf("insert message %d: %w", seq, err)
			}
		}
		for _, m := range w.Mail {
			if _, err := q.exec(ctx, `UPDATE deputy_mailbox SET consumed_at = ? WHERE id = ? AND instance_id = ? AND consumed_at IS NULL`,
				at, m, id); err != nil {
				return fmt.Errorf("consume mail %d: %w", m, err)
			}
		}
		if next >= firstSeq+len(msgs) {
			return nil // all stored already: a repeat
		}
		if w.Progress != nil {
			if err := s.setProgress(ctx, q, id, *w.Progress); err != nil {
				return err
			}
		}
		for _, e := range w.Events {
			if _, err := s.appendEvent(ctx, q, id, e.Kind, e.Data); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("append messages %d..%d to %s: %w", firstSeq, firstSeq+len(msgs)-1, id, err)
	}
	return nil
}

// messageCount is the number of messages stored for instance id. Sequence
// numbers have no gaps, so it is the last one + 1, which the primary key
// finds without counting.
func messageCount(ctx context.Context, q querier, id string) (int, error) {
	var n int
	if err := q.row(ctx, `SELECT COALESCE(MAX(seq), -1) + 1 FROM deputy_messages WHERE instance_id = ?`, id).Scan(&n); err != nil {
		return 0, fmt.Errorf("count messages: %w", err)
	}
	return n, nil
}

// Transcript returns instance id's whole original transcript in order.
func (s *Store) Transcript(ctx context.Context, id string) ([]llm.Message, error) {
	rows, err := s.q().query(ctx, `SELECT seq, content FROM deputy_messages WHERE instance_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("transcript of %s: %w", id, err)
	}
	defer rows.Close()
	var out []llm.Message
	for rows.Next() {
		var seq int
		var c string
		if err := rows.Scan(&seq, &c); err != nil {
			return nil, fmt.Errorf("transcript of %s: %w", id, err)
		}
		var m llm.Message
		if err := json.Unmarshal([]byte(c), &m); err != nil {
			return nil, fmt.Errorf("transcript of %s: message %d: %w", id, seq, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("transcript of %s: %w", id, err)
	}
	if len(out) == 0 {
		if err := exists(ctx, s.q(), id); err != nil {
			return nil, fmt.Errorf("transcript of %s: %w", id, err)
		}
	}
	return out, nil
}

// Compaction is a summary that stands in, for the model, for an instance's
// messages up to and including ThroughSeq. The messages themselves stay in
// the transcript.
type Compaction struct {
	InstanceID string    `json:"instance_id"`
	Turn       int       `json:"turn"` // the turn that compacted; one compaction per turn
	ThroughSeq int       `json:"through_seq"`
	Summary    string    `json:"summary"`
	Usage      llm.Usage `json:"usage"` // what the summary call cost
	At         time.Time `json:"at"`    // set by the store
}

// RecordCompaction stores c. ThroughSeq must name a stored message. The
// same compaction again is a no-op; a different one for the same turn is
// ErrConflict.
func (s *Store) RecordCompaction(ctx context.Context, c Compaction) error {
	err := s.tx(ctx, func(q querier) error {
		if _, err := lockState(ctx, q, c.InstanceID); err != nil {
			return err
		}
		n, err := messageCount(ctx, q, c.InstanceID)
		if err != nil {
			return err
		}
		if c.ThroughSeq < 0 || c.ThroughSeq >= n {
			return fmt.Errorf("through seq %d: the transcript has messages 0..%d", c.ThroughSeq, n-1)
		}
		u := usageJSON(c.Usage)
		res, err := q.exec(ctx, `INSERT INTO deputy_compactions (instance_id, turn, through_seq, summary, usage, at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (instance_id, turn) DO NOTHING`,
			c.InstanceID, c.Turn, c.ThroughSeq, c.Summary, u, s.now().UnixMicro())
		if err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil || n == 1 {
			return err
		}
		var through int
		var summary, usage string
		err = q.row(ctx, `SELECT through_seq, summary, usage FROM deputy_compactions WHERE instance_id = ? AND turn = ?`,
			c.InstanceID, c.Turn).Scan(&through, &summary, &usage)
		if err != nil {
			return fmt.Errorf("read stored compaction: %w", err)
		}
		if through != c.ThroughSeq || summary != c.Summary || !bytes.Equal([]byte(usage), []byte(u)) {
			return fmt.Errorf("%w: turn %d already has a different compaction", ErrConflict, c.Turn)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record compaction of %s at turn %d: %w", c.InstanceID, c.Turn, err)
	}
	return nil
}

// Compactions lists instance id's compactions by turn.
func (s *Store) Compactions(ctx context.Context, id string) ([]Compaction, error) {
	rows, err := s.q().query(ctx, `SELECT turn, through_seq, summary, usage, at FROM deputy_compactions
		WHERE instance_id = ? ORDER BY turn`, id)
	if err != nil {
		return nil, fmt.Errorf("compactions of %s: %w", id, err)
	}
	defer rows.Close()
	var out []Compaction
	for rows.Next() {
		c := Compaction{InstanceID: id}
		var usage string
		var at int64
		if err := rows.Scan(&c.Turn, &c.ThroughSeq, &c.Summary, &usage, &at); err != nil {
			return nil, fmt.Errorf("compactions of %s: %w", id, err)
		}
		if err := json.Unmarshal([]byte(usage), &c.Usage); err != nil {
			return nil, fmt.Errorf("compactions of %s: turn %d usage: %w", id, c.Turn, err)
		}
		c.At = fromMicros(at)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("compactions of %s: %w", id, err)
	}
	if len(out) == 0 {
		if err := exists(ctx, s.q(), id); err != nil {
			return nil, fmt.Errorf("compactions of %s: %w", id, err)
		}
	}
	return out, nil
}
