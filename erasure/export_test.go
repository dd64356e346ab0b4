package erasure

// HoldForgets keeps the forgets that commit from now on waiting in the
// queue, as if a group were running, until release starts the group
// commit; queued says how many wait. Tests use it to commit a known set of
// forgets in one group.
func HoldForgets(s *Eraser) (queued func() int, release func()) {
	c := s.group
	c.mu.Lock()
	c.running = true
	c.mu.Unlock()
	queued = func() int {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.queue)
	}
	return queued, func() { go c.drain() }
}
