module github.com/ucxx-go/ucxx-go

go 1.26.8

tool (
	github.com/go-python/gopy
	golang.org/x/tools/cmd/goimports
)

require (
	github.com/NVIDIA/go-nvml v0.13.0-1
	github.com/go-python/gopy v0.4.10
	golang.org/x/sync v0.24.0
)

require (
	github.com/gonuts/commander v0.1.0 // indirect
	github.com/gonuts/flag v0.1.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/telemetry v0.0.0-20261009151841-97e8ea77aa2a // indirect
	golang.org/x/tools v0.52.0 // indirect
)
