// Package evidence is the Go client's offline verifier of regulator
// exports (client.Client.Export): the one strict reader of docs/transparency.md
// (bundle.CheckExport), apart from package client so that the memory
// writers that link the client do not link the transparency log's code.
package evidence

import "github.com/shredd/shredd/bundle"

// ExportOptions says what VerifyExport checks beyond the export: the
// subject id and salt that open the subject commitment (both or neither)
// and a checkpoint of the log saved earlier, which the export's log must
// extend.
type ExportOptions = bundle.Options

// ExportReport is what VerifyExport established.
type ExportReport = bundle.Report

// VerifyExport checks a regulator export (client.Client.Export) offline, with
// the attestation key file and the log key file obtained from the operator
// out of band: the same strict reader and the same checks as `shredd
// verify` (bundle.CheckExport, docs/transparency.md "Reading an export
// strictly"). opts' AttestationKey and LogKey are ignored. On a refusal,
// ExportReason(err) is the spec's reason code, the one shredd verify, the
// page and the Python client give for the same bytes.
func VerifyExport(export, keyFile, logKeyFile []byte, opts ExportOptions) (*ExportReport, error) {
	return bundle.CheckExport(export, keyFile, logKeyFile, opts)
}

// ExportReason returns the reason code of an error of VerifyExport ("ok"
// for nil).
func ExportReason(err error) string { return bundle.Reason(err) }
