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
	content, err := encodeAppend(id, firstSeq, msgs, w.Events)
	if err != nil {
		return err
	}
	err = s.tx(ctx, func(q querier) error { return s.appendWith(ctx, q, id, turn, firstSeq, msgs, content, w) })
	if err != nil {
		return fmt.Errorf("append messages %d..%d to %s: %w", firstSeq, firstSeq+len(msgs)-1, id, err)
	}
	return nil
}

// appendWith is an append's work in a transaction (q): content is msgs
// encoded (encodeAppend).
func (s *Store) appendWith(ctx context.Context, q querier, id string, turn, firstSeq int, msgs []llm.Message, content []string, w With) error {
	next, err := checkAppend(ctx, q, id, turn, firstSeq, content)
	if err != nil {
		return err
	}
	at := s.now().UnixMicro()
	if err := insertMessages(ctx, q, id, turn, next, firstSeq, msgs, content, at); err != nil {
		return err
	}
	if err := consumeMail(ctx, q, id, w.Mail, at); err != nil {
		return err
	}
	if next >= firstSeq+len(msgs) {
		return nil // all stored already: a repeat
	}
	return s.announce(ctx, q, id, w)
}

// encodeAppend checks an append's events and first seq and encodes its
// messages as they are stored (and compared with what is stored), before
// any transaction starts: bad input costs the database nothing.
func encodeAppend(id string, firstSeq int, msgs []llm.Message, events []NewEvent) ([]string, error) {
	for _, e := range events {
		if err := checkEvent(e.Kind, e.Data); err != nil {
			return nil, fmt.Errorf("append to %s: %w", id, err)
		}
	}
	if firstSeq < 0 {
		return nil, fmt.Errorf("append messages to %s: negative seq %d", id, firstSeq)
	}
	content := make([]string, len(msgs))
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("append messages to %s: message %d: %w", id, firstSeq+i, err)
		}
		content[i] = string(b)
	}
	return content, nil
}

// checkAppend locks instance id and tells whether the messages content
// from firstSeq on may be appended: no gap after those stored, the ones
// stored already the same, and nothing new for an ended instance. It
// returns the number of messages stored.
func checkAppend(ctx context.Context, q querier, id string, turn, firstSeq int, content []string) (next int, err error) {
	st, err := lockState(ctx, q, id)
	if err != nil {
		return 0, err
	}
	if next, err = messageCount(ctx, q, id); err != nil {
		return 0, err
	}
	if firstSeq > next {
		return 0, fmt.Errorf("%w: seq %d would leave a gap after the %d messages stored", ErrConflict, firstSeq, next)
	}
	if err := matchStored(ctx, q, id, turn, firstSeq, content); err != nil {
		return 0, err
	}
	if firstSeq+len(content) > next && st.Terminal() {
		return 0, fmt.Errorf("%w (%s)", ErrTerminal, st)
	}
	return next, nil
}

// matchStored: the part of an append that is stored already must be
// stored with the same turn and content, or the append is ErrConflict.
// Its rows are closed when it returns, before the transaction writes.
func matchStored(ctx context.Context, q querier, id string, turn, firstSeq int, content []string) error {
	rows, err := q.query(ctx, `SELECT seq, turn, content FROM deputy_messages
		WHERE instance_id = ? AND seq >= ? AND seq < ? ORDER BY seq`, id, firstSeq, firstSeq+len(content))
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
	return nil
}

// insertMessages stores the messages of an append from seq next on: those
// before it are stored already (checkAppend).
func insertMessages(ctx context.Context, q querier, id string, turn, next, firstSeq int, msgs []llm.Message,
	content []string, at int64) error {
	for seq := next; seq < firstSeq+len(msgs); seq++ {
		_, err := q.exec(ctx, `INSERT INTO deputy_messages (instance_id, seq, turn, role, content, at)
			VALUES (?, ?, ?, ?, ?, ?)`, id, seq, turn, string(msgs[seq-firstSeq].Role), content[seq-firstSeq], at)
		if err != nil {
			return fmt.Errorf("insert message %d: %w", seq, err)
		}
	}
	return nil
}

// consumeMail marks instance id's mail ids consumed at at, the time its
// messages were stored. Mail consumed already (a repeat) is left as it is.
func consumeMail(ctx context.Context, q querier, id string, ids []int64, at int64) error {
	for _, m := range ids {
		if _, err := q.exec(ctx, `UPDATE deputy_mailbox SET consumed_at = ? WHERE id = ? AND instance_id = ? AND consumed_at IS NULL`,
			at, m, id); err != nil {
			return fmt.Errorf("consume mail %d: %w", m, err)
		}
	}
	return nil
}

// announce writes what an append that stored something new brings along
// (With): the instance's progress, with its progress event, then the
// append's own events.
func (s *Store) announce(ctx context.Context, q querier, id string, w With) error {
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

// MessageCount is the number of messages instance id's transcript holds.
func (s *Store) MessageCount(ctx context.Context, id string) (int, error) {
	n, err := messageCount(ctx, s.q(), id)
	if err != nil {
		return 0, fmt.Errorf("transcript of %s: %w", id, err)
	}
	return n, nil
}
