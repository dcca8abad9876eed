//go:build !faultinject

package pipeline

// faultPoint marks a moment of the attempt path where a test may kill the
// process (see faultinject_on.go). Without the faultinject build tag it does
// nothing and costs nothing.
func faultPoint(string) {}
