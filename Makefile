# Development tasks. `make test` is the README's test command and what CI runs.
# The Python used is .venv's if there is one, else python3 from PATH; it must have
# ucxx-go installed (pip install '.[test]'), which also brings the libucx wheel that
# the Go tests link against.
PYTHON ?= $(shell [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)
export UCX_NET_DEVICES ?= lo
# Bounded fuzzing in CI: the header decoders, the connection hello, the real receive path (two engines
# over loopback, hostile header and frame sequences), the execution-plan reader, and worker addresses
# (the check, and ucp_ep_create behind it). Budgets are execution counts,
# about 10 s each here: a duration (-fuzztime 10s) races Go's fuzz coordinator at its
# deadline and fails with "context deadline exceeded" under load (golang/go#75804,
# fixed in Go 1.27).
FUZZ_DECODER_EXECS ?= 100000x
FUZZ_PATH_EXECS ?= 500x
FUZZ_PLAN_EXECS ?= 20000x

.PHONY: test test-go test-asan test-py fuzz ucx demo clean executor-ptx

test: test-go test-asan fuzz test-py

# .ucx points at the libucx wheel's headers and libraries, for cgo (see ucxx/cgo.go).
ucx:
	@dir=$$($(PYTHON) -c 'import libucx, os; print(os.path.dirname(os.path.abspath(libucx.__file__)))') && \
	  ln -sfn "$$dir" .ucx && echo ".ucx -> $$dir"

# Connections go by address exchange unless UCXGO_CONNECT=manager: the packages that
# connect through listeners run once more with UCX's connection manager.
test-go: ucx
	go vet ./...
	go test -race -count=1 ./...
	UCXGO_CONNECT=manager go test -race -count=1 ./core ./core/collective

# The Go tests once more under AddressSanitizer: memory UCX reads or writes after Go
# freed it, or out of bounds in the C shim (found a test's send buffer collected while
# UCX still held the send). Leaks are not checked: UCX keeps some until exit.
test-asan: ucx
	ASAN_OPTIONS=detect_leaks=0 go test -asan -count=1 ./...

# Each fuzz target runs its budget on top of its committed corpus.
fuzz: ucx
	go test -run '^$$' -fuzz '^FuzzDecodeHeader$$' -fuzztime $(FUZZ_DECODER_EXECS) -fuzzminimizetime 1s ./core
	go test -run '^$$' -fuzz '^FuzzMessageDecoder$$' -fuzztime $(FUZZ_DECODER_EXECS) -fuzzminimizetime 1s ./core
	go test -run '^$$' -fuzz '^FuzzReadHello$$' -fuzztime $(FUZZ_DECODER_EXECS) -fuzzminimizetime 1s ./core
	go test -run '^$$' -fuzz '^FuzzMultiReceivePath$$' -fuzztime $(FUZZ_PATH_EXECS) -fuzzminimizetime 1s ./core
	go test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZ_PLAN_EXECS) -fuzzminimizetime 1s ./core/plan
	go test -run '^$$' -fuzz '^FuzzCheckWorkerAddress$$' -fuzztime $(FUZZ_DECODER_EXECS) -fuzzminimizetime 1s ./ucxx
	go test -run '^$$' -fuzz '^FuzzConnectAddress$$' -fuzztime $(FUZZ_PLAN_EXECS) -fuzzminimizetime 1s ./ucxx

test-py:
	$(PYTHON) -m pytest -q -p no:cacheprovider tests
	UCXGO_CONNECT=manager $(PYTHON) -m pytest -q -p no:cacheprovider tests/test_address_families.py \
	  tests/test_error_handling.py tests/test_echo.py tests/test_faults.py

# The executor's kernels as PTX, checked in (nothing compiles CUDA at build or run
# time). NVCC must be CUDA 13.0's, whose PTX ISA (9.0) every CUDA 13 driver loads:
# pip's nvidia-cuda-nvcc, nvidia-nvvm, nvidia-cuda-crt, nvidia-cuda-runtime and
# nvidia-cuda-cccl wheels at 13.0.x, unpacked into one tree, give it without CUDA.
NVCC ?= nvcc
executor-ptx:
	cd core/executor/kernels && for k in reduce program; do $(NVCC) -ptx -arch=compute_80 -O3 -o $$k.ptx $$k.cu || exit 1; done

demo:
	$(PYTHON) benchmarks/demo.py

clean:
	rm -rf build .ucx *.egg-info
