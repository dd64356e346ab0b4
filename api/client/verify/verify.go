// Package verify is the Go client's offline verifier of regulator
// exports (client.Client.Export): the one strict reader of docs/transparency.md
// (bundle.CheckExport), apart from package client so that the memory
// writers that link the client do not link the transparency log's code.
package verify

import "github.com/shredd/shredd/bundle"

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
// strictly"). opts' AttestationKey and LogKey are ignored. On a refusal,
// Reason(err) is the spec's reason code, the one shredd verify, the page
// and the Python client give for the same bytes.
func Export(export, keyFile, logKeyFile []byte, opts Options) (*Report, error) {
	return bundle.CheckExport(export, keyFile, logKeyFile, opts)
}

// Reason returns the reason code of an error of Export ("ok" for nil).
func Reason(err error) string { return bundle.Reason(err) }
