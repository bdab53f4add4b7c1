package fake

// The request log's bounds: Options.MaxLogged entries and
// Options.MaxLogBytes of them, the oldest dropped first.

// defaultMaxLogBytes bounds the log by weight when Options.MaxLogBytes is
// zero: with 10,000 entries of up to 32 MiB bodies and 1 MiB answers the
// count alone would let a long-running fake grow to hundreds of GiB.
const defaultMaxLogBytes = 256 << 20

// logSlot is one exchange's place in the log. gone is set when the slot
// leaves the log (dropped past a bound, or by ClearRequests): an exchange
// still in flight then logs itself afresh when it ends, instead of
// updating a copy nobody can read.
type logSlot struct {
	entry LoggedRequest
	size  int64
	gone  bool
}

// logWeight is what an entry counts against MaxLogBytes: the answer, and
// the body twice, as the decoded Request holds the conversation again.
func logWeight(e *LoggedRequest) int64 {
	return int64(2*len(e.Body) + len(e.Answer))
}

// putLogLocked stores e in slot, or in a new slot at the log's end when
// slot is nil or gone, then drops the oldest entries past the bounds. It
// returns the slot e is in (nil when the log keeps nothing). The caller
// holds s.mu.
func (s *Server) putLogLocked(slot *logSlot, e *LoggedRequest) *logSlot {
	if s.maxLog == 0 {
		return nil
	}
	w := logWeight(e)
	if slot == nil || slot.gone {
		slot = &logSlot{}
		s.log = append(s.log, slot)
	} else {
		s.logBytes -= slot.size
	}
	slot.entry, slot.size = *e, w
	s.logBytes += w
	drop := 0
	for len(s.log)-drop > 1 && (len(s.log)-drop > s.maxLog || (s.maxBytes > 0 && s.logBytes > s.maxBytes)) {
		old := s.log[drop]
		old.gone = true
		s.logBytes -= old.size
		s.log[drop] = nil
		drop++
	}
	if drop > 0 {
		s.log = s.log[drop:]
	}
	return slot
}

// clearLogLocked empties the log; the caller holds s.mu.
func (s *Server) clearLogLocked() {
	for _, slot := range s.log {
		slot.gone = true
	}
	s.log, s.logBytes = nil, 0
}
