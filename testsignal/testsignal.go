// Package testsignal lets a test wait for a moment inside the code under
// test — the worker claimed, the heartbeat ran, the listener woke — instead
// of polling for its effects or sleeping. The code calls Signal at that
// moment; a test that called Init first receives the value with Wait.
// Until Init, Signal costs one nil check and does nothing, so the signals
// stay in production code at no cost. (River's rivershared/testsignal is
// the model.)
package testsignal

import (
	"fmt"
	"time"
)

// WaitTimeout bounds Wait: long enough for a loaded machine, short enough
// that a signal that never comes fails the test rather than its deadline.
// (10 s was not: ten 1 MB ListJobs pages rendered at once under -race took
// longer at load 30.)
const WaitTimeout = 30 * time.Second

// buffer is how many signals may wait to be received before Signal drops
// the newest; tests wait for one signal at a time, far below it.
const buffer = 1024

// Signal is one named moment carrying a value of type T. The zero Signal is
// off. Init and the first Signal must not race: call Init before starting
// the code that signals.
type Signal[T any] struct {
	ch chan T
}

// Init turns the signal on.
func (s *Signal[T]) Init() { s.ch = make(chan T, buffer) }

// Signal records the moment with v, if the signal is on. It never blocks:
// past the buffer a signal is dropped, which a test notices as a value it
// waited for and never got.
func (s *Signal[T]) Signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}

// Wait returns the oldest value not yet received, waiting up to
// WaitTimeout for one; an error when none came or the signal is off.
func (s *Signal[T]) Wait() (T, error) {
	var zero T
	if s.ch == nil {
		return zero, fmt.Errorf("testsignal: Wait on a signal that was not Init")
	}
	select {
	case v := <-s.ch:
		return v, nil
	case <-time.After(WaitTimeout):
		return zero, fmt.Errorf("testsignal: no signal within %s", WaitTimeout)
	}
}

// WaitFor receives values until one satisfies ok and returns it, waiting up
// to WaitTimeout for each.
func (s *Signal[T]) WaitFor(ok func(T) bool) (T, error) {
	for {
		v, err := s.Wait()
		if err != nil || ok(v) {
			return v, err
		}
	}
}
