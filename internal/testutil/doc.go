// Package testutil holds helpers shared by crivk's unit tests. Only test
// files import it.
package testutil
