// Package collective is collective communication between ranks: a Communicator of N
// processes (bootstrap.go), over an engine of its own whose endpoints reach every
// other rank through UCX worker addresses, on which execution plans in MSCCL++'s
// format (core/plan) run.
//
// The communicator owns its engine: its completions are read here, in Go, never by
// Python, and its traffic does not mix with the application's endpoints. Everything
// a remote rank sends (bootstrap records, counts, fingerprints) is untrusted input:
// bounded, checked, and a violation is a typed error, never a hang or a wrong result.
package collective
