package telemetry

// OpenInstances counts the instances whose invoke_agent span is open: 0
// once every instance ended, or nothing is left behind in the map.
func (t *Tracer) OpenInstances() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.insts)
}
