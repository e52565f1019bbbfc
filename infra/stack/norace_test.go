//go:build !race

package stack_test

import "github.com/aws/jsii-runtime-go"

// closeJSII stops the jsii runtime (see race_test.go for the race detector's case).
func closeJSII() { jsii.Close() }
