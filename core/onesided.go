package core

import (
	"fmt"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// One-sided transfers are a choice made when an engine starts (Options.OneSided):
// they need UCX's remote memory access in the engine's context, and a context with it
// serves the puts and gets UCX emulates in software (every transport without RMA of
// its own: TCP, and shared memory without CMA) at any address the peer names,
// checked against no key. Without it, UCX installs no handler for them and drops
// them (with a warning in its log). UCX's rendezvous for puts and gets (of GPU memory)
// is served with tags and active messages alone: the RMA guard (ucxx/rmaguard.go)
// drops it for the workers of a context without RMA. README, "What UCX itself trusts",
// says what stays open.

// features are the UCX features the engine's context is made with.
func (e *Engine) features() ucxx.Features {
	if e.opts.OneSided {
		return ucxx.FeatureRMA
	}
	return 0
}

// oneSided refuses op, a one-sided operation, on an engine without Options.OneSided.
func (e *Engine) oneSided(op string) error {
	if !e.opts.OneSided {
		return fmt.Errorf("%s: %w", op, ErrOneSidedOff)
	}
	return nil
}
