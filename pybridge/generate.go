package pybridge

// Python's copy of the constants Go shares with it: python/ucxx_go/_constants.py.
//go:generate go test -run TestPythonConstants -update .
