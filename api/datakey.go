package api

import (
	"context"
	"net/http"

	"github.com/shredd/shredd"
)

// dataKeyResponse carries the artifact key: as secret as a plaintext.
type dataKeyResponse struct {
	Artifact    string   `json:"artifact"`
	Header      string   `json:"header"` // standard base64 of the envelope header bytes
	Key         string   `json:"key"`    // standard base64 of the artifact key
	LineageSize int      `json:"lineage_size"`
	Inherited   []string `json:"inherited,omitempty"` // as encrypt's
}

// dataKey serves POST /v1/datakey: client-side sealing. A request (or an
// item of its batch_input) is a sourceBody: an encrypt without the
// plaintext, which the client seals itself. The answer holds key material,
// so it must not be stored by caches on the way.
func (s *sealHandlers) dataKey(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	serveCallMany(s.codec, w, r, s.dataKeyItem, s.dataKeyMany)
}

// dataKeyMany runs the items of a data key batch through the service's
// batch path: their registrations are committed together.
func (s *sealHandlers) dataKeyMany(ctx context.Context, reqs []*sourceBody) ([]dataKeyResponse, []error) {
	return runValid(reqs,
		func(req *sourceBody) (shredd.Source, error) { return req.forToken(ctx) },
		func(srcs []shredd.Source) ([]shredd.DataKey, []error) { return s.svc.DataKeys(ctx, srcs) },
		dataKeyAnswer)
}

// dataKeyAnswer encodes a data key and clears the service's copy of the
// key: the answer's base64 is the only one left.
func dataKeyAnswer(dk shredd.DataKey) dataKeyResponse {
	defer clear(dk.Key)
	return dataKeyResponse{
		Artifact:    dk.Artifact.String(),
		Header:      b64String(dk.Header),
		Key:         b64String(dk.Key),
		LineageSize: dk.Lineage,
		Inherited:   idsOrNil(dk.Inherited),
	}
}

// dataKeyItem validates and runs one data key request, alone or in a batch.
func (s *sealHandlers) dataKeyItem(ctx context.Context, req *sourceBody) (dataKeyResponse, error) {
	src, err := req.forToken(ctx)
	if err != nil {
		return dataKeyResponse{}, err
	}
	dk, err := s.svc.DataKey(ctx, src)
	if err != nil {
		return dataKeyResponse{}, err
	}
	return dataKeyAnswer(dk), nil
}
