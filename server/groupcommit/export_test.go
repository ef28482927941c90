package groupcommit

// Pending is how many submissions wait in the batch being gathered.
func (b *Batcher) Pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending)
}

// Flush writes the batch being gathered now, as its linger would.
func (b *Batcher) Flush() {
	b.mu.Lock()
	batch := b.take()
	b.mu.Unlock()
	if len(batch) > 0 {
		b.write(batch)
	}
}
