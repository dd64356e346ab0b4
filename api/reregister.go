package api

import (
	"context"
	"net/http"

	"github.com/shredd/shredd"
)

// reregisterRequest is one envelope presented to POST
// /v1/artifacts/reregister, alone or as an item of its batch_input.
type reregisterRequest struct {
	Ciphertext string `json:"ciphertext"`
	Context    string `json:"context,omitempty"`
	Holder     string `json:"holder,omitempty"`
}

// reregisterResponse is the answer for one envelope: the artifact its
// authenticated header names, and whether it was registered now
// ("registered") or the registry held it already ("known").
type reregisterResponse struct {
	Artifact    string `json:"artifact"`
	Kind        string `json:"kind"`
	LineageSize int    `json:"lineage_size"`
	Status      string `json:"status"`
}

// reregister answers POST /v1/artifacts/reregister: the repair after a
// restore of a database older than some ciphertexts (docs/operations.md,
// the restore drill). Admin scope: it writes the registry from envelopes
// alone.
func (ah *artifactHandlers) reregister(w http.ResponseWriter, r *http.Request) {
	serveCallMany(ah.codec, w, r, func(ctx context.Context, req *reregisterRequest) (reregisterResponse, error) {
		out, errs := ah.reregisterMany(ctx, []*reregisterRequest{req})
		return out[0], errs[0]
	}, ah.reregisterMany)
}

// reregisterMany checks each request and reregisters the valid ones in one
// call of the service.
func (ah *artifactHandlers) reregisterMany(ctx context.Context, reqs []*reregisterRequest) ([]reregisterResponse, []error) {
	return runValid(reqs, func(req *reregisterRequest) (shredd.ReregisterInput, error) {
		if req.Ciphertext == "" {
			return shredd.ReregisterInput{}, badRequest("missing_field", "ciphertext is required")
		}
		aad, err := b64("context", req.Context)
		if err != nil {
			return shredd.ReregisterInput{}, err
		}
		return shredd.ReregisterInput{Ciphertext: req.Ciphertext, Context: aad, Holder: req.Holder}, nil
	}, func(in []shredd.ReregisterInput) ([]shredd.Reregistered, []error) {
		return ah.svc.Reregister(ctx, in)
	}, func(o shredd.Reregistered) reregisterResponse {
		st := "registered"
		if o.Known {
			st = "known"
		}
		return reregisterResponse{Artifact: o.Artifact.String(), Kind: o.Kind, LineageSize: o.Lineage, Status: st}
	})
}
