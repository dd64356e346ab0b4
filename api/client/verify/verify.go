// Package verify is the Go client's offline verifier of regulator
// exports (client.Client.Export): the one strict reader of docs/transparency.md
// (bundle.CheckExport), apart from package client so that the memory
// writers that link the client do not link the transparency log's code.
package verify

import (
	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
)

// Options says what Export checks beyond the export: the subject id and
// salt that open the subject commitment (both or neither) and a checkpoint
// of the log saved earlier, which the export's log must extend.
type Options = bundle.Options

// Report is what Export established.
type Report = bundle.Report

// Export checks a regulator export (client.Client.Export) offline, with
// the attestation key file and the log key file obtained from the operator
// out of band: the same strict reader and the same checks as `shredd
// verify` (bundle.CheckExport, docs/transparency.md "Reading an export
// strictly"). Both key files are required (an export checked with its own
// keys only proves it agrees with itself), and a subject and a salt go
// together: else ErrUsage. opts' AttestationKey and LogKey are ignored.
// On a refusal,
// Reason(err) is the spec's reason code, the one shredd verify, the page
// and the Python client give for the same bytes.
func Export(export, keyFile, logKeyFile []byte, opts Options) (*Report, error) {
	return bundle.CheckExport(export, keyFile, logKeyFile, opts)
}

// Attestation checks a bare attestation file offline (docs/attestation.md
// §9), with the attestation key file obtained from the operator out of
// band: the same strict reader as `shredd verify FILE.json`
// (bundle.CheckAttestation): the key file, the JSON rules, the envelope,
// the signature, every rule of the statement, and that subject and salt
// open its commitment (both or neither; neither: not checked). On a
// refusal, Reason(err) is the spec's reason code; the program's own
// malformed inputs (no key file, a subject without a salt, an empty
// subject, a salt of the wrong size) are ErrUsage (Reason "usage").
func Attestation(data, keyFile []byte, subject string, salt []byte) (*attest.Statement, error) {
	return bundle.CheckAttestation(data, keyFile, subject, salt)
}

// ErrUsage reports a malformed input of the verifier's own (Reason
// "usage"): nothing was checked.
var ErrUsage = bundle.ErrUsage

// Reason returns the reason code of an error of Export or Attestation
// ("ok" for nil, "usage" for ErrUsage).
func Reason(err error) string { return bundle.Reason(err) }
