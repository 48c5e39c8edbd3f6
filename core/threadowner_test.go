package core

import (
	"strings"
	"testing"
)

// The tripwires are on for every test of this package: a component that uses the
// progress thread's tables from another thread panics in its tests.
func init() { threadChecks = true }

// TestTablesTripOnWrongThread: the request and endpoint tables panic when used from a
// thread other than the progress thread (this test's goroutine never runs on it: that
// thread is locked to its own goroutine), and not when used from it.
func TestTablesTripOnWrongThread(t *testing.T) {
	e := newTestEngine(t, Options{})
	for name, use := range map[string]func(){
		"request table":  func() { e.requests.get(1) },
		"endpoint table": func() { e.eps.get(1) },
	} {
		msg := func() (msg string) {
			defer func() {
				if r := recover(); r != nil {
					msg, _ = r.(string)
				}
			}()
			use()
			return ""
		}()
		if !strings.HasPrefix(msg, "core: "+name+" used on thread") {
			t.Errorf("%s from the wrong thread: panic %q", name, msg)
		}
		if err := e.onThread(use); err != nil {
			t.Fatalf("%s on the progress thread: %v", name, err)
		}
	}
}
