// Package testutil holds helpers shared by crivk's unit tests: WaitFor
// (wait on a condition with a deadline, never a sleep) and the builders
// more than one package's tests start from (Pod, Resources). A builder
// that only one package's tests use stays in that package. Only test files
// import it, and it imports no crivk package, so any package's tests may.
package testutil
