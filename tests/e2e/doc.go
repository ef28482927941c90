// Package e2e is oncejob's end-to-end suite: black-box tests that build the
// real binaries (cmd/oncejob, grpcurl, examples/receiver) once in TestMain
// and drive them as processes — kills at failpoints, Postgres failovers and
// outages, relays to real sinks, the CLI, the console in a browser, the
// Python SDK and receiver, the README's examples. It holds no code of its
// own beyond this file: everything is in its _test.go files.
package e2e
