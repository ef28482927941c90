package groupcommit

// Flush writes the batch being gathered now, as its linger would.
func (b *Batcher) Flush() {
	b.mu.Lock()
	batch := b.take()
	b.mu.Unlock()
	if len(batch) > 0 {
		b.write(batch)
	}
}
