package vault_test

import (
	"os"
	"strings"
	"testing"

	"github.com/shredd/shredd/keystore/vault"
)

// TestPolicyDocumented checks that the operations guide shows exactly the
// policies the code grants (and the conformance suite runs with).
func TestPolicyDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{vault.Policy("transit", "shredd-root"), vault.SubjectPolicy("transit")} {
		if !strings.Contains(string(b), p) {
			t.Errorf("docs/operations.md does not show this policy:\n%s", p)
		}
	}
}
