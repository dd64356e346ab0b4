package evidence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/testkeys"
	"github.com/shredd/shredd/translog"
)

// The cases of this file test classes, not single inputs
// (docs/transparency.md §10a, "The corpus"): every string field with the
// spec's space and invisible characters at its start, its end and alone;
// every line kind of a signed note doubled, valid and invalid, in both
// orders; every path in its spellings; integers at their bounds; bare
// attestations; witnesses and their keys.

// classChars are the characters the string classes use: every code point
// of the spec's WS set, the invisible ones readers most often disagree on
// (format characters, default-ignorables, C0 and C1 controls), and two
// that look blank but are not in the INVISIBLE set (U+2800, U+3164's
// neighbour U+3165 is a letter).
var classChars = []rune{
	// WS (Unicode White_Space), all 25.
	0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680,
	0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A,
	0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
	// INVISIBLE beyond WS: controls, format and default-ignorable code points.
	0x00, 0x1F, 0x7F, 0x9F, 0xAD, 0x034F, 0x0600, 0x061C, 0x06DD, 0x115F, 0x17B4, 0x180B, 0x180E,
	0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x202A, 0x202E, 0x2060, 0x2064, 0x2066, 0x206F,
	0x3164, 0xFE0F, 0xFEFF, 0xFFA0, 0xFFF9, 0x110BD, 0x1D173, 0xE0001, 0xE007F, 0xE0100, 0xE0FFF,
	// Not INVISIBLE: a blank-looking symbol and a letter.
	0x2800, 0x3165,
}

// edgeChars are the subset used at the edges of fields with a grammar
// (ids, kinds, names), where every one is refused alike.
var edgeChars = []rune{0x20, 0x09, 0x0A, 0x0B, 0x0D, 0x85, 0xA0, 0x1680, 0x2028, 0x3000, 0xFEFF, 0x200B, 0x00}

func cname(r rune) string { return fmt.Sprintf("u%04x", r) }

// bare adds a case of a bare attestation made from a scene changed by
// mod, checked with the standard key, subject and salt changed by in.
func (g *gen) bare(slug, about, reason string, mod func(*scene), in func(*inputs)) {
	s := newScene()
	if mod != nil {
		mod(s)
	}
	b := s.build()
	att := b.files[1].data
	subj, salt := s.subject, hex.EncodeToString(s.salt)
	i := inputs{key: defaultKey(), subject: &subj, salt: &salt}
	if in != nil {
		in(&i)
	}
	g.cases = append(g.cases, Case{Name: fmt.Sprintf("%03d-%s", len(g.cases)+1, slug), About: about, Attestation: att,
		Key: i.key, Subject: i.subject, Salt: i.salt, Verdict: verdictOf(reason), Reason: reason})
}

func (g *gen) bareCases() {
	g.bare("bare-valid", "a bare attestation, checked with the key, the subject and the salt", "ok", nil, nil)
	g.bare("bare-valid-pretty", "a bare attestation whose envelope is indented (whitespace between tokens)", "ok", func(s *scene) {
		s.attestation = func(b []byte) []byte {
			return bytes.ReplaceAll(bytes.ReplaceAll(b, []byte(`,"`), []byte(",\n  \"")), []byte(`{"`), []byte("{\n  \""))
		}
	}, nil)
	g.bare("bare-salt-upper-hex", "a bare attestation with the salt typed in upper-case hex", "ok", nil, func(in *inputs) {
		in.salt = str(strings.ToUpper(*in.salt))
	})
	g.bare("bare-statement-2-53", "a bare attestation whose statement holds an epoch of 2^53 (signed)", "json.number", func(s *scene) {
		s.payload = sub(`"epoch":1`, `"epoch":9007199254740992`)
	}, nil)
	g.bare("bare-statement-2-63", "a bare attestation whose statement holds an epoch of 2^63-1 (signed; Go reads it, JavaScript rounds it)", "json.number", func(s *scene) {
		s.payload = sub(`"epoch":1`, `"epoch":9223372036854775807`)
	}, nil)
	g.bare("bare-duplicate-key", "a bare attestation with claim twice (signed)", "json.duplicate-key", func(s *scene) {
		s.payload = sub(`"claim":"cryptographically erased"`, `"claim":"not erased","claim":"cryptographically erased"`)
	}, nil)
	g.bare("bare-unknown-field", "a bare attestation with an unknown envelope field", "json.schema", func(s *scene) {
		s.attestation = sub(`"payloadType"`, `"note":"x","payloadType"`)
	}, nil)
	g.bare("bare-bad-signature", "a bare attestation whose payload changed after signing", "envelope.signature", func(s *scene) {
		s.attestation = func(b []byte) []byte {
			c := append([]byte{}, b...)
			i := bytes.Index(c, []byte(`"payload":"`)) + len(`"payload":"`) + 40
			c[i] ^= 0x01
			if !bytes.ContainsAny(c[i:i+1], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") {
				c[i] = 'A'
			}
			return c
		}
	}, nil)
	g.bare("bare-other-key", "a bare attestation checked with another key", "envelope.signature", nil, func(in *inputs) {
		in.key = mustPEM(testkeys.AttestationKey(2).Public().(ed25519.PublicKey))
	})
	g.bare("bare-condition-pending", "a bare attestation with a pending condition (signed)", "statement.conditions", func(s *scene) {
		s.pred = func(p *attest.Predicate) { p.Conditions[1].Status = attest.StatusPending }
	}, nil)
	g.bare("bare-subject-other", "a bare attestation checked with another subject", "subject.mismatch", nil, func(in *inputs) { in.subject = str("bob@example.com") })
	g.bare("bare-subject-trailing-newline", "a bare attestation checked with the subject and a line break", "subject.mismatch", nil, func(in *inputs) {
		in.subject = str(subject + "\n")
	})
	g.bare("bare-key-bom", "a bare attestation checked with a key file starting with a BOM", "text.bom", nil, func(in *inputs) {
		in.key = append([]byte("\xef\xbb\xbf"), in.key...)
	})
	g.bare("bare-key-no-final-newline", "a bare attestation checked with a key file without its final newline", "key.format", nil, func(in *inputs) {
		in.key = bytes.TrimSuffix(in.key, []byte("\n"))
	})
	g.bare("bare-key-crlf", "a bare attestation checked with a key file in CRLF", "key.format", nil, func(in *inputs) {
		in.key = bytes.ReplaceAll(in.key, []byte("\n"), []byte("\r\n"))
	})
	g.bare("bare-key-nbsp", "a bare attestation checked with a key file ending in NBSP after its last LF", "key.trailing", nil, func(in *inputs) {
		in.key = append(in.key, "\u00a0"...)
	})
	g.bare("bare-json-bom", "a bare attestation starting with a BOM", "json.bom", func(s *scene) {
		s.attestation = func(b []byte) []byte { return append([]byte("\xef\xbb\xbf"), b...) }
	}, nil)
	g.bare("bare-json-trailing-nbsp", "a bare attestation followed by NBSP (not JSON whitespace)", "json.trailing", func(s *scene) {
		s.attestation = func(b []byte) []byte { return append(b, "\u00a0"...) }
	}, nil)
	g.bare("bare-json-trailing-newline", "a bare attestation followed by a newline (JSON whitespace)", "ok", func(s *scene) {
		s.attestation = func(b []byte) []byte { return append(b, '\n') }
	}, nil)
	for _, salt := range []struct{ slug, about, salt string }{
		{"space", "with a space inside", hex.EncodeToString(fixed("salt")[:16]) + " " + hex.EncodeToString(fixed("salt")[16:])},
		{"trailing-space", "followed by a space", hex.EncodeToString(fixed("salt")) + " "},
		{"trailing-newline", "followed by a line break", hex.EncodeToString(fixed("salt")) + "\n"},
		{"0x", "with 0x before it", "0x" + hex.EncodeToString(fixed("salt"))},
		{"short", "of 63 hex digits", hex.EncodeToString(fixed("salt"))[:63]},
		{"nbsp", "followed by NBSP", hex.EncodeToString(fixed("salt")) + "\u00a0"},
	} {
		g.bare("bare-salt-"+salt.slug, "a salt "+salt.about+" (a usage error, nothing checked)", bundle.ReasonUsage, nil, func(in *inputs) { in.salt = str(salt.salt) })
	}
	g.withInputs("salt-space", "an export checked with a salt with a space inside (a usage error)", bundle.ReasonUsage, func(in *inputs) {
		in.salt = str((*in.salt)[:32] + " " + (*in.salt)[32:])
	})
	g.withInputs("subject-without-salt", "an export checked with a subject and no salt (a usage error)", bundle.ReasonUsage, func(in *inputs) { in.salt = nil })
}

// blankCases: a condition's evidence and a residual's description with
// every class character alone (blank unless the character is visible),
// at the start and at the end (never blank: nothing is trimmed).
func (g *gen) blankCases() {
	for _, r := range classChars {
		c := string(r)
		blankEv, blankDesc := "statement.conditions", "statement.residuals"
		if !attest.Blank(c) {
			blankEv, blankDesc = "ok", "ok"
		}
		g.bare("evidence-alone-"+cname(r), fmt.Sprintf("a condition's evidence that is U+%04X alone (signed)", r), blankEv, func(s *scene) {
			s.pred = func(p *attest.Predicate) { p.Conditions[2].Evidence = c }
		}, nil)
		g.bare("description-alone-"+cname(r), fmt.Sprintf("a residual's description that is U+%04X alone (signed)", r), blankDesc, func(s *scene) {
			s.pred = func(p *attest.Predicate) { p.Residuals[0].Description = c }
		}, nil)
		g.bare("evidence-around-"+cname(r), fmt.Sprintf("a condition's evidence with U+%04X before and after it (signed; not blank, kept)", r), "ok", func(s *scene) {
			s.pred = func(p *attest.Predicate) { p.Conditions[2].Evidence = c + p.Conditions[2].Evidence + c }
		}, nil)
		g.bare("description-around-"+cname(r), fmt.Sprintf("a residual's description with U+%04X before and after it (signed; not blank, kept)", r), "ok", func(s *scene) {
			s.pred = func(p *attest.Predicate) { p.Residuals[0].Description = c + p.Residuals[0].Description + c }
		}, nil)
	}
	g.bare("evidence-invisible-mix", "a condition's evidence of NBSP, U+200B, U+FEFF and U+3000 (signed; blank)", "statement.conditions", func(s *scene) {
		s.pred = func(p *attest.Predicate) { p.Conditions[0].Evidence = "\u00a0\u200b\ufeff\u3000" }
	}, nil)
	g.bare("description-empty", "a residual's empty description (signed)", "statement.residuals", func(s *scene) {
		s.pred = func(p *attest.Predicate) { p.Residuals[1].Description = "" }
	}, nil)
	// The cases, in exports too.
	for _, r := range []rune{0x85, 0xFEFF, 0x3000, 0x2028, 0x1680} {
		c := string(r)
		g.scenario("export-evidence-"+cname(r), fmt.Sprintf("an export whose attestation has a condition's evidence of U+%04X alone (signed)", r), "statement.conditions", func(s *scene) {
			s.pred = func(p *attest.Predicate) { p.Conditions[3].Evidence = c }
		})
		g.scenario("export-description-"+cname(r), fmt.Sprintf("an export whose attestation has a residual's description of U+%04X alone (signed)", r), "statement.residuals", func(s *scene) {
			s.pred = func(p *attest.Predicate) { p.Residuals[1].Description = c }
		})
	}
}

// fieldCases: every other string field of the statement with a space or
// invisible character at its start or its end: each has a grammar, and
// each reader refuses it with the rule's code.
func (g *gen) fieldCases() {
	fields := []struct {
		slug, reason string
		set          func(p *attest.Predicate, f func(string) string)
	}{
		{"forget", "statement.format", func(p *attest.Predicate, f func(string) string) { p.Forget = f(p.Forget) }},
		{"claim", "statement.claim", func(p *attest.Predicate, f func(string) string) { p.Claim = f(p.Claim) }},
		{"condition-name", "statement.conditions", func(p *attest.Predicate, f func(string) string) { p.Conditions[0].Name = f(p.Conditions[0].Name) }},
		{"condition-status", "statement.conditions", func(p *attest.Predicate, f func(string) string) { p.Conditions[4].Status = f(p.Conditions[4].Status) }},
		{"residual-kind", "statement.residuals", func(p *attest.Predicate, f func(string) string) { p.Residuals[0].Kind = f(p.Residuals[0].Kind) }},
		{"artifact-id", "statement.format", func(p *attest.Predicate, f func(string) string) { p.Artifacts[0].ID = f(p.Artifacts[0].ID) }},
		{"artifact-closed-by", "statement.format", func(p *attest.Predicate, f func(string) string) {
			p.Artifacts[0].ClosedBy = f(p.Artifacts[0].ClosedBy)
		}},
		{"root-store", "statement.format", func(p *attest.Predicate, f func(string) string) {
			p.KeyEvidence.RootStore = f(p.KeyEvidence.RootStore)
		}},
	}
	for _, fd := range fields {
		for _, r := range edgeChars {
			c := string(r)
			g.bare(fd.slug+"-leading-"+cname(r), fmt.Sprintf("the statement's %s with U+%04X before it (signed)", fd.slug, r), fd.reason, func(s *scene) {
				s.pred = func(p *attest.Predicate) { fd.set(p, func(v string) string { return c + v }) }
			}, nil)
			g.bare(fd.slug+"-trailing-"+cname(r), fmt.Sprintf("the statement's %s with U+%04X after it (signed)", fd.slug, r), fd.reason, func(s *scene) {
				s.pred = func(p *attest.Predicate) { fd.set(p, func(v string) string { return v + c }) }
			}, nil)
		}
	}
}

// noteCases: every line kind of a signed note doubled, valid and invalid
// in both orders; and the log key and the checkpoint's bytes around them.
func (g *gen) noteCases() {
	logLine := func(signed []byte) string {
		i := bytes.LastIndex(signed, []byte("\n\n"))
		return string(signed[i+2:])
	}
	badLine := func(line string) string {
		name, b64, _ := strings.Cut(strings.TrimPrefix(strings.TrimSuffix(line, "\n"), "— "), " ")
		sig, _ := base64.StdEncoding.DecodeString(b64)
		sig[10] ^= 1
		return "— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n"
	}
	cp := func(slug, about, reason string, f func([]byte) []byte) {
		g.scenario(slug, about, reason, func(s *scene) { s.cpSigned = f })
	}
	cp("note-log-line-twice", "the log's signature line twice, identical", "checkpoint.format", func(b []byte) []byte { return append(b, logLine(b)...) })
	cp("note-log-line-valid-then-invalid", "the log's valid signature line, then an invalid line of the same key", "checkpoint.format", func(b []byte) []byte {
		return append(b, badLine(logLine(b))...)
	})
	cp("note-log-line-invalid-then-valid", "an invalid line of the log key, then its valid line", "checkpoint.format", func(b []byte) []byte {
		i := bytes.LastIndex(b, []byte("\n\n")) + 2
		return append(append(append([]byte{}, b[:i]...), badLine(string(b[i:]))...), b[i:]...)
	})
	cp("note-log-line-invalid", "the log's signature line replaced by an invalid one", "checkpoint.signature", func(b []byte) []byte {
		i := bytes.LastIndex(b, []byte("\n\n")) + 2
		return append(append([]byte{}, b[:i]...), badLine(string(b[i:]))...)
	})
	other := "— witness.example/x " + base64.StdEncoding.EncodeToString(append([]byte{1, 2, 3, 4}, make([]byte, 72)...)) + "\n"
	cp("note-unknown-line-twice", "a line of an unknown key twice, identical", "checkpoint.format", func(b []byte) []byte { return append(append(b, other...), other...) })
	cp("note-unknown-line-once", "a line of an unknown key once", "ok", func(b []byte) []byte { return append(b, other...) })
	cp("note-empty-line-in-signatures", "an empty line between two signature lines", "checkpoint.signature", func(b []byte) []byte { return append(append(b, '\n'), other...) })
	cp("note-signature-crlf", "the signature line ending in CR LF", "checkpoint.format", func(b []byte) []byte {
		return append(b[:len(b)-1], "\r\n"...)
	})
	cp("note-signature-two-spaces", "two spaces between the name and the signature", "checkpoint.format", func(b []byte) []byte {
		i := bytes.LastIndexByte(b, ' ')
		return append(append(append([]byte{}, b[:i]...), ' '), b[i:]...)
	})
	cp("note-signature-tab", "a tab between the name and the signature", "checkpoint.format", func(b []byte) []byte {
		c := append([]byte{}, b...)
		c[bytes.LastIndexByte(c, ' ')] = '\t'
		return c
	})
	cp("note-signature-nbsp", "NBSP after the signature's base64", "checkpoint.format", func(b []byte) []byte {
		return append(b[:len(b)-1], "\u00a0\n"...)
	})
	cp("note-signature-noncanonical", "the log's signature in non-canonical base64 (non-zero padding bits)", "checkpoint.format", func(b []byte) []byte {
		return nonCanonical(b, len(b)-1)
	})
	cp("note-no-final-newline", "the checkpoint without its final newline", "checkpoint.format", func(b []byte) []byte { return b[:len(b)-1] })
	cp("note-blank-line-twice", "two empty lines before the signatures (the text ends in an empty line)", "checkpoint.signature", func(b []byte) []byte {
		i := bytes.LastIndex(b, []byte("\n\n"))
		return append(append(append([]byte{}, b[:i]...), '\n'), b[i:]...)
	})
	text := func(slug, about, reason string, f func(string) string) {
		g.scenario(slug, about, reason, func(s *scene) { s.cpText = f })
	}
	text("note-origin-twice", "the origin line twice, signed", "checkpoint.format", func(t string) string {
		o, _, _ := strings.Cut(t, "\n")
		return o + "\n" + t
	})
	text("note-size-twice", "the size line twice, signed", "checkpoint.format", func(t string) string { return strings.Replace(t, "\n7\n", "\n7\n7\n", 1) })
	text("note-hash-twice", "the root hash line twice, signed (the second is an extension line)", "ok", func(t string) string {
		l := strings.Split(t, "\n")
		return t + l[2] + "\n"
	})
	text("note-empty-extension", "an empty extension line, signed", "checkpoint.format", func(t string) string { return t + "\n" })
	text("note-origin-trailing-space", "the origin followed by a space, signed", "checkpoint.origin", func(t string) string {
		return strings.Replace(t, testkeys.LogOrigin+"\n", testkeys.LogOrigin+" \n", 1)
	})
	text("note-origin-trailing-nbsp", "the origin followed by NBSP, signed", "checkpoint.origin", func(t string) string {
		return strings.Replace(t, testkeys.LogOrigin+"\n", testkeys.LogOrigin+"\u00a0\n", 1)
	})
	text("note-size-trailing-space", "the size followed by a space, signed", "checkpoint.format", func(t string) string { return strings.Replace(t, "\n7\n", "\n7 \n", 1) })
	g.scenario("saved-log-line-valid-then-invalid", "a saved checkpoint with the log's valid line, then an invalid line of the same key", "saved.format", func(s *scene) {
		s.savedHook = func(b []byte) []byte { return append(b, badLine(logLine(b))...) }
	})
	g.scenario("saved-log-line-twice", "a saved checkpoint with the log's line twice", "saved.format", func(s *scene) {
		s.savedHook = func(b []byte) []byte { return append(b, logLine(b)...) }
	})
	// Proof lines doubled.
	pf := func(slug, about, reason string, f func([]byte) []byte) {
		g.scenario(slug, about, reason, func(s *scene) {
			s.proofs = func(idx int64, p []byte) []byte {
				if idx == 3 {
					return f(p)
				}
				return p
			}
		})
	}
	pf("proof-header-twice", "an inclusion proof's header line twice", "proof.format", func(p []byte) []byte {
		h, _, _ := bytes.Cut(p, []byte("\n"))
		return append(append(append([]byte{}, h...), '\n'), p...)
	})
	pf("proof-index-twice", "an inclusion proof's index line twice", "proof.format", func(p []byte) []byte {
		l := bytes.SplitAfterN(p, []byte("\n"), 3)
		return bytes.Join([][]byte{l[0], l[1], l[1], l[2]}, nil)
	})
	pf("proof-hash-twice", "an inclusion proof's first hash line twice", "proof.inclusion", func(p []byte) []byte {
		l := bytes.SplitAfterN(p, []byte("\n"), 4)
		return bytes.Join([][]byte{l[0], l[1], l[2], l[2], l[3]}, nil)
	})
	pf("proof-index-trailing-space", "an inclusion proof's index followed by a space", "proof.format", func(p []byte) []byte {
		l := bytes.SplitAfterN(p, []byte("\n"), 3)
		return bytes.Join([][]byte{l[0], bytes.Replace(l[1], []byte("\n"), []byte(" \n"), 1), l[2]}, nil)
	})
	pf("proof-hash-crlf", "an inclusion proof's hash line ending in CR LF", "proof.format", func(p []byte) []byte {
		l := bytes.SplitAfterN(p, []byte("\n"), 4)
		return bytes.Join([][]byte{l[0], l[1], bytes.Replace(l[2], []byte("\n"), []byte("\r\n"), 1), l[3]}, nil)
	})
	// The log key file around its line.
	lk := func(slug, about, reason string, f func([]byte) []byte) {
		g.withInputs(slug, about, reason, func(in *inputs) { in.logKey = f(in.logKey) })
	}
	line := func(b []byte) []byte { return bytes.TrimSuffix(b, []byte("\n")) }
	for _, r := range []rune{0xA0, 0x0B, 0x3000, 0xFEFF, 0x85, 0x20, 0x09, 0x2028, 0x200B} {
		c := string(r)
		lead := "logkey.format"
		if r == 0xFEFF {
			lead = "text.bom"
		}
		lk("logkey-leading-"+cname(r), fmt.Sprintf("the log key file with U+%04X before the key", r), lead, func(b []byte) []byte { return append([]byte(c), b...) })
		lk("logkey-trailing-"+cname(r), fmt.Sprintf("the log key file with U+%04X after the key's line", r), "logkey.format", func(b []byte) []byte {
			return append(append(line(b), c...), '\n')
		})
	}
	lk("logkey-two-newlines", "the log key file ending in two LFs", "logkey.format", func(b []byte) []byte { return append(b, '\n') })
	lk("logkey-upper-hex", "the log key with its key hash in upper-case hex", "logkey.format", func(b []byte) []byte {
		p := strings.SplitN(string(b), "+", 3)
		return []byte(p[0] + "+" + strings.ToUpper(p[1]) + "+" + p[2])
	})
	lk("logkey-space-in-base64", "the log key with a space inside its base64", "logkey.format", func(b []byte) []byte {
		l := line(b)
		return append(append(append(append([]byte{}, l[:len(l)-8]...), ' '), l[len(l)-8:]...), '\n')
	})
}

// nonCanonical sets an unused bit of the base64 that ends just before
// b[end] (its padding starts there): the text decodes to the same bytes
// by a lenient decoder, and is not canonical.
func nonCanonical(b []byte, end int) []byte {
	const a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	c := append([]byte{}, b...)
	for end > 0 && c[end-1] == '=' {
		end--
	}
	c[end-1] = a[strings.IndexByte(a, c[end-1])|1]
	return c
}

// Witnesses: three fixed cosignature/v1 keys.
var witnessNames = []string{"witness.example/w1", "witness.example/w2", "witness.example/w3"}

type wkey struct {
	name string
	priv ed25519.PrivateKey
	id   uint32
	vkey string
}

func witnessKeyFor(name string, seed string) wkey {
	priv := ed25519.NewKeyFromSeed(fixed(seed))
	pub := priv.Public().(ed25519.PublicKey)
	h := sha256.Sum256(append(append([]byte(name+"\n"), translog.CosignatureAlg), pub...))
	id := binary.BigEndian.Uint32(h[:4])
	return wkey{name: name, priv: priv, id: id,
		vkey: fmt.Sprintf("%s+%08x+%s", name, id, base64.StdEncoding.EncodeToString(append([]byte{translog.CosignatureAlg}, pub...)))}
}

func witnessKey(i int) wkey { return witnessKeyFor(witnessNames[i], "witness "+witnessNames[i]) }

// witnessFile returns the corpus's shared file of a witness key file's
// bytes, or "" when they are not one.
func witnessFile(b []byte) string {
	for i := range witnessNames {
		if string(b) == witnessKey(i).vkey+"\n" {
			return fmt.Sprintf("files/witness-%d.vkey", i+1)
		}
	}
	return ""
}

// cosign returns k's cosignature line on the signed note b at time t.
func (k wkey) cosign(b []byte, t uint64) string {
	text := b[:bytes.LastIndex(b, []byte("\n\n"))+1]
	sig := ed25519.Sign(k.priv, translog.CosignatureMessage(t, text))
	raw := binary.BigEndian.AppendUint32(nil, k.id)
	raw = binary.BigEndian.AppendUint64(raw, t)
	return "— " + k.name + " " + base64.StdEncoding.EncodeToString(append(raw, sig...)) + "\n"
}

const cosignedAt = 1772359590 // 2026-03-01T10:06:30Z

func (g *gen) witnessCases() {
	files := func(ks ...wkey) [][]byte {
		var out [][]byte
		for _, k := range ks {
			out = append(out, []byte(k.vkey+"\n"))
		}
		return out
	}
	w1, w2, w3 := witnessKey(0), witnessKey(1), witnessKey(2)
	wc := func(slug, about, reason string, cosigned func([]byte) []byte, keys [][]byte, required *int) {
		s := newScene()
		s.cpSigned = cosigned
		b := s.build()
		in := s.inputs(b)
		in.witnesses, in.required = keys, required
		g.add(slug, about, reason, b.export(s.dir), in)
	}
	by := func(ks ...wkey) func([]byte) []byte {
		return func(b []byte) []byte {
			out := append([]byte{}, b...)
			for _, k := range ks {
				out = append(out, k.cosign(b, cosignedAt)...)
			}
			return out
		}
	}
	one, two := ptr(1), ptr(2)
	wc("witness-valid", "a checkpoint cosigned by the one witness required", "ok", by(w1), files(w1), nil)
	wc("witness-valid-2-of-2", "a checkpoint cosigned by both witnesses given", "ok", by(w1, w2), files(w1, w2), nil)
	wc("witness-missing-all-required", "two witnesses given, all required, one cosigned", "checkpoint.witnesses", by(w1), files(w1, w2), nil)
	wc("witness-missing-1-of-2", "two witnesses given, one required, one cosigned", "ok", by(w2), files(w1, w2), one)
	wc("witness-2-of-3", "three witnesses given, two required, two cosigned", "ok", by(w1, w3), files(w1, w2, w3), two)
	wc("witness-none", "no cosignature, one witness required", "checkpoint.witnesses", nil, files(w1), nil)
	wc("witness-not-required", "a cosigned checkpoint checked without witnesses", "ok", by(w1, w2), nil, nil)
	wc("witness-invalid", "a cosignature that does not verify", "checkpoint.witnesses", func(b []byte) []byte {
		l := w1.cosign(b, cosignedAt)
		raw, _ := base64.StdEncoding.DecodeString(strings.TrimSuffix(strings.SplitN(l, " ", 3)[2], "\n"))
		raw[20] ^= 1
		return append(append([]byte{}, b...), "— "+w1.name+" "+base64.StdEncoding.EncodeToString(raw)+"\n"...)
	}, files(w1), nil)
	wc("witness-time-max", "a cosignature at time 2^63-1", "ok", func(b []byte) []byte { return append(append([]byte{}, b...), w1.cosign(b, math.MaxInt64)...) }, files(w1), nil)
	wc("witness-time-2-63", "a cosignature at time 2^63 (beyond the spec's bound: invalid)", "checkpoint.witnesses", func(b []byte) []byte {
		return append(append([]byte{}, b...), w1.cosign(b, 1<<63)...)
	}, files(w1), nil)
	wc("witness-time-max-uint64", "a cosignature at time 2^64-1 (invalid)", "checkpoint.witnesses", func(b []byte) []byte {
		return append(append([]byte{}, b...), w1.cosign(b, math.MaxUint64)...)
	}, files(w1), nil)
	wc("witness-time-zero", "a cosignature at time 0", "ok", func(b []byte) []byte { return append(append([]byte{}, b...), w1.cosign(b, 0)...) }, files(w1), nil)
	wc("witness-time-year-10000", "a cosignature in the year 10000", "ok", func(b []byte) []byte {
		return append(append([]byte{}, b...), w1.cosign(b, 253402300800)...)
	}, files(w1), nil)
	wc("witness-short", "a cosignature of 75 bytes (invalid)", "checkpoint.witnesses", func(b []byte) []byte {
		l := w1.cosign(b, cosignedAt)
		raw, _ := base64.StdEncoding.DecodeString(strings.TrimSuffix(strings.SplitN(l, " ", 3)[2], "\n"))
		return append(append([]byte{}, b...), "— "+w1.name+" "+base64.StdEncoding.EncodeToString(raw[:75])+"\n"...)
	}, files(w1), nil)
	wc("witness-line-twice", "the witness's valid cosignature line twice", "checkpoint.format", func(b []byte) []byte {
		l := w1.cosign(b, cosignedAt)
		return append(append(append([]byte{}, b...), l...), l...)
	}, files(w1), nil)
	wc("witness-valid-then-invalid", "the witness's valid cosignature, then an invalid one", "checkpoint.format", func(b []byte) []byte {
		return append(append(append([]byte{}, b...), w1.cosign(b, cosignedAt)...), w1.cosign(b, 1<<63)...)
	}, files(w1), nil)
	wc("witness-noncanonical-then-valid", "a bad cosignature in non-canonical base64, then the witness's valid one", "checkpoint.format", func(b []byte) []byte {
		l := w1.cosign(b, cosignedAt+1)
		c := nonCanonical([]byte(l), len(l)-1)
		return append(append(append([]byte{}, b...), c...), w1.cosign(b, cosignedAt)...)
	}, files(w1), nil)
	wc("witness-noncanonical", "the witness's cosignature in non-canonical base64", "checkpoint.format", func(b []byte) []byte {
		l := w1.cosign(b, cosignedAt)
		return append(append([]byte{}, b...), nonCanonical([]byte(l), len(l)-1)...)
	}, files(w1), nil)
	wc("witness-other-line-feff", "a cosignature line of an unknown key whose name holds U+FEFF, beside the required witness's", "ok", func(b []byte) []byte {
		x := witnessKeyFor("witness.example/\ufeffw9", "witness feff")
		return append(append(append([]byte{}, b...), x.cosign(b, cosignedAt)...), w1.cosign(b, cosignedAt)...)
	}, files(w1), nil)
	wc("witness-log-key-line-is-not-a-cosignature", "the log's own line does not count for a witness key of another name", "checkpoint.witnesses", nil, files(w2), nil)
	// The witness key files.
	key := func(slug, about, reason string, kf []byte) {
		wc(slug, about, reason, by(w1), [][]byte{kf}, nil)
	}
	v := w1.vkey
	key("witness-key-no-newline", "a witness key file without a final newline", "ok", []byte(v))
	key("witness-key-bom", "a witness key file starting with U+FEFF (a BOM)", "text.bom", []byte("\ufeff"+v+"\n"))
	key("witness-key-trailing-feff", "a witness key file with U+FEFF after the key", "witness.format", []byte(v+"\ufeff\n"))
	key("witness-key-trailing-nel", "a witness key file ending in U+0085", "witness.format", []byte(v+"\u0085"))
	key("witness-key-trailing-nbsp", "a witness key file with NBSP after the key", "witness.format", []byte(v+"\u00a0\n"))
	key("witness-key-leading-space", "a witness key file with a space before the key", "witness.format", []byte(" "+v+"\n"))
	key("witness-key-crlf", "a witness key file ending in CR LF", "witness.format", []byte(v+"\r\n"))
	key("witness-key-two-newlines", "a witness key file ending in two LFs", "witness.format", []byte(v+"\n\n"))
	key("witness-key-upper-hex", "a witness key with its key ID in upper-case hex", "witness.format", []byte(strings.Replace(v, fmt.Sprintf("%08x", w1.id), fmt.Sprintf("%08X", w1.id), 1)+"\n"))
	key("witness-key-not-utf8", "a witness key file with a byte that is not UTF-8", "text.utf8", []byte(v+"\xff\n"))
	key("witness-key-log-key", "the log's key given as a witness key (type 0x01, not 0x04)", "witness.format", defaultLogKey())
	key("witness-key-wrong-id", "a witness key whose key ID is not its own", "witness.format", []byte(strings.Replace(v, fmt.Sprintf("%08x", w1.id), fmt.Sprintf("%08x", w1.id^1), 1)+"\n"))
	wc("witness-key-twice", "the same witness key file given twice", "witness.duplicate", by(w1), files(w1, w1), nil)
	renamed := witnessKeyFor("witness.example/renamed", "witness "+witnessNames[0])
	wc("witness-key-two-names", "one witness key given under two names (it would count twice)", "witness.duplicate", by(w1, renamed), files(w1, renamed), nil)
	wc("witness-required-too-many", "two witnesses required of one given (a usage error)", bundle.ReasonUsage, by(w1), files(w1), two)
	wc("witness-required-zero", "zero witnesses required (a usage error)", bundle.ReasonUsage, by(w1), files(w1), ptr(0))
	wc("witness-required-without-keys", "a witness required without witness keys (a usage error)", bundle.ReasonUsage, by(w1), nil, one)
}

// pathCases: the spellings of a member's path.
func (g *gen) pathCases() {
	ar := func(slug, about, reason string, extra func(dir string) []member, rename func(dir, name string) string) {
		g.archive(slug, about, reason, func(b *built, dir string) []byte {
			var ms []member
			if extra != nil {
				ms = append(ms, extra(dir)...)
			}
			for _, f := range b.files {
				n := dir + "/" + f.name
				if rename != nil {
					n = rename(dir, f.name)
				}
				ms = append(ms, regular(n, f.data))
			}
			return gzipWith(tarOf(ms), 0, -10)
		})
	}
	dirm := func(names ...string) func(string) []member {
		return func(dir string) []member {
			var ms []member
			for _, n := range names {
				ms = append(ms, member{hdr: dirHeader(strings.ReplaceAll(n, "D", dir))})
			}
			return ms
		}
	}
	ar("path-directory-no-slash", "the top directory member without its trailing slash", "ok", dirm("D"), nil)
	ar("path-directory-both-spellings", "the top directory member with and without its trailing slash", "tar.duplicate", dirm("D", "D/"), nil)
	ar("path-directory-both-spellings-reversed", "the top directory member with and then without its trailing slash", "tar.duplicate", dirm("D/", "D"), nil)
	ar("path-directory-two-slashes", "the top directory member ending in two slashes", "tar.path", dirm("D//"), nil)
	ar("path-double-slash", "a file path with an empty segment (dir//name)", "tar.path", nil, func(dir, name string) string {
		if name == bundle.FileAttestation {
			return dir + "//" + name
		}
		return dir + "/" + name
	})
	ar("path-dot-segment", "a file path with a . segment (dir/./name)", "tar.path", nil, func(dir, name string) string {
		if name == bundle.FileAttestation {
			return dir + "/./" + name
		}
		return dir + "/" + name
	})
	ar("path-leading-dot", "every path starting with ./", "tar.path", nil, func(dir, name string) string { return "./" + dir + "/" + name })
	ar("path-file-trailing-slash", "a regular file whose path ends in a slash", "tar.path", nil, func(dir, name string) string {
		if name == bundle.FileAttestation {
			return dir + "/" + name + "/"
		}
		return dir + "/" + name
	})
	ar("path-backslash", "a file path with a backslash in place of the slash", "bundle.layout", nil, func(dir, name string) string {
		if name == bundle.FileAttestation {
			return dir + "\\" + name
		}
		return dir + "/" + name
	})
	ar("path-file-and-directory", "attestation.json as a file and as a directory", "tar.duplicate", nil, nil)
	g.cases[len(g.cases)-1].Export = func() []byte {
		s := newScene()
		b := s.build()
		ms := []member{}
		for _, f := range b.files {
			ms = append(ms, regular(s.dir+"/"+f.name, f.data))
		}
		ms = append(ms, member{hdr: dirHeader(s.dir + "/" + bundle.FileAttestation + "/")})
		return gzipWith(tarOf(ms), 0, -10)
	}()
	g.archive("path-prefix-trailing-slash", "a ustar prefix ending in a slash (prefix/ + / + name)", "tar.path", func(b *built, dir string) []byte {
		var ms []member
		for _, f := range b.files {
			if f.name == bundle.FileAttestation {
				ms = append(ms, member{hdr: prefixHeader(dir+"/", f.name, len(f.data)), data: f.data})
				continue
			}
			ms = append(ms, regular(dir+"/"+f.name, f.data))
		}
		return gzipWith(tarOf(ms), 0, -10)
	})
}

// boundCases: integers at their bounds, in the statement, the events and
// the checkpoint.
func (g *gen) boundCases() {
	ev := func(slug, about, reason string, i int, old, new string) {
		g.scenario(slug, about, reason, func(s *scene) {
			s.eventBytes = func(j int, p []byte) []byte {
				if j == i {
					return sub(old, new)(p)
				}
				return p
			}
		})
	}
	ev("event-barrier-max-safe", "a forget_committed barrier of 2^53-1, signed", "ok", 2, `"barrier":7`, `"barrier":9007199254740991`)
	ev("event-barrier-negative-max-safe", "a forget_committed barrier of -(2^53-1), signed", "event.format", 2, `"barrier":7`, `"barrier":-9007199254740991`)
	ev("event-barrier-negative-2-53", "a forget_committed barrier of -2^53, signed", "json.number", 2, `"barrier":7`, `"barrier":-9007199254740992`)
	ev("event-barrier-minus-zero", "a forget_committed barrier of -0, signed", "json.schema", 2, `"barrier":7`, `"barrier":-0`)
	g.scenario("statement-epoch-zero", "an epoch of 0 (signed)", "statement.key-evidence", func(s *scene) { s.payload = sub(`"epoch":1`, `"epoch":0`) })
	g.scenario("statement-epoch-minus-zero", "an epoch of -0 (signed)", "json.schema", func(s *scene) { s.payload = sub(`"epoch":1`, `"epoch":-0`) })
	g.bare("bare-retired-max-safe", "a bare attestation with a retired root version of 2^53-1 (signed)", "ok", func(s *scene) {
		s.pred = func(p *attest.Predicate) { p.KeyEvidence.RetiredRootVersions = []int{1, 1<<53 - 1} }
	}, nil)
	g.bare("bare-retired-2-53", "a bare attestation with a retired root version of 2^53 (signed)", "json.number", func(s *scene) {
		s.pred = func(p *attest.Predicate) { p.KeyEvidence.RetiredRootVersions = []int{1, 1 << 53} }
	}, nil)
}

// inputCases: the verifier's own inputs (§10a, "usage"; §10b): a subject
// and a salt go together, an empty subject id is none.
func (g *gen) inputCases() {
	g.bare("bare-no-subject", "a bare attestation checked without a subject and a salt (the commitment is not opened)", "ok", nil, func(in *inputs) {
		in.subject, in.salt = nil, nil
	})
	g.bare("bare-subject-without-salt", "a bare attestation checked with a subject and no salt (a usage error)", bundle.ReasonUsage, nil, func(in *inputs) { in.salt = nil })
	g.bare("bare-salt-without-subject", "a bare attestation checked with a salt and no subject (a usage error)", bundle.ReasonUsage, nil, func(in *inputs) { in.subject = nil })
	g.bare("bare-empty-subject", "a bare attestation checked with an empty subject id and a salt (a usage error)", bundle.ReasonUsage, nil, func(in *inputs) { in.subject = str("") })
	g.withInputs("empty-subject", "an export checked with an empty subject id and a salt (a usage error)", bundle.ReasonUsage, func(in *inputs) { in.subject = str("") })
}

// probeCases: holders' signed probe answers in the attestation
// (docs/attestation.md §6a).
func (g *gen) probeCases() {
	probeID, nonce := strings.Repeat("5e", 16), hex.EncodeToString(fixed("probe nonce"))
	mk := func(s *scene, f func(p *attest.Probe)) func(*attest.Predicate) {
		return func(p *attest.Predicate) {
			pr := attest.Probe{Holder: holderID, Probe: probeID, Nonce: nonce,
				AskedAt: created.Add(-5 * time.Minute), AnsweredAt: created.Add(-4 * time.Minute), Artifacts: []string{heldID}, Found: []string{}}
			resign := true
			if f != nil {
				f(&pr)
				resign = pr.Signature == nil
			}
			if resign {
				pr.Signature, _ = attest.SignProbe(pr.Probe, p.Forget, pr.Holder, pr.Nonce, pr.Artifacts, pr.Markers, pr.Found, s.holder)
			}
			p.Probes = append(p.Probes, pr)
		}
	}
	pb := func(slug, about, reason string, f func(p *attest.Probe)) {
		g.bare("probe-"+slug, about, reason, func(s *scene) { s.pred = mk(s, f) }, nil)
	}
	pb("valid", "a holder's clean probe answer, signed, about the artifact its ack closes", "ok", nil)
	g.scenario("probe-valid-export", "an export whose attestation carries a holder's clean probe answer", "ok", func(s *scene) { s.pred = mk(s, nil) })
	g.bare("probe-two", "two clean probes of one holder (at verification and after its compaction interval)", "ok", func(s *scene) {
		first := mk(s, nil)
		second := mk(s, func(p *attest.Probe) {
			p.Probe, p.AskedAt, p.AnsweredAt = strings.Repeat("6f", 16), created.Add(-2*time.Minute), created.Add(-2*time.Minute)
		})
		s.pred = func(p *attest.Predicate) { first(p); second(p) }
	}, nil)
	pb("markers", "a clean probe that also asked for two markers", "ok", func(p *attest.Probe) { p.Markers = []string{"canary-a", "canary-b"} })
	pb("found", "a probe that found the artifact (signed: the holder said so)", "statement.probes", func(p *attest.Probe) { p.Found = []string{heldID} })
	pb("found-marker", "a probe that found a marker", "statement.probes", func(p *attest.Probe) {
		p.Markers, p.Found = []string{"canary-a"}, []string{"canary-a"}
	})
	pb("bad-signature", "a probe answer whose signature does not verify", "statement.probes", func(p *attest.Probe) {
		sig, _ := attest.SignProbe(p.Probe, forgetID, p.Holder, p.Nonce, p.Artifacts, p.Markers, p.Found, testkeys.AttestationKey(1))
		sig[3] ^= 1
		p.Signature = sig
	})
	pb("other-nonce", "a probe answer signed over another nonce than the one stated", "statement.probes", func(p *attest.Probe) {
		sig, _ := attest.SignProbe(p.Probe, forgetID, p.Holder, strings.Repeat("0", 64), p.Artifacts, p.Markers, p.Found, testkeys.AttestationKey(1))
		p.Signature = sig
	})
	pb("signed-by-other", "a probe answer signed by a key that is not the holder's", "statement.probes", func(p *attest.Probe) {
		sig, _ := attest.SignProbe(p.Probe, forgetID, p.Holder, p.Nonce, p.Artifacts, p.Markers, p.Found, testkeys.AttestationKey(3))
		p.Signature = sig
	})
	pb("holder-without-ack", "a probe of a holder with no ack in the attestation", "statement.probes", func(p *attest.Probe) { p.Holder = "ann-2" })
	pb("artifact-not-acked", "a probe that asked about an artifact its holder's ack does not close", "statement.probes", func(p *attest.Probe) {
		p.Artifacts = []string{sealedID}
	})
	pb("artifacts-empty", "a probe that asked about nothing", "statement.probes", func(p *attest.Probe) { p.Artifacts = []string{} })
	pb("artifacts-repeated", "a probe that names its artifact twice", "statement.probes", func(p *attest.Probe) { p.Artifacts = []string{heldID, heldID} })
	pb("markers-unsorted", "a probe whose markers are not sorted", "statement.probes", func(p *attest.Probe) { p.Markers = []string{"canary-b", "canary-a"} })
	pb("marker-space", "a probe marker with a space", "statement.probes", func(p *attest.Probe) { p.Markers = []string{"canary a"} })
	pb("asked-before-commit", "a probe asked before the forget committed", "statement.probes", func(p *attest.Probe) {
		p.AskedAt = created.Add(-31 * time.Minute)
	})
	pb("answered-before-asked", "a probe answered before it was asked", "statement.probes", func(p *attest.Probe) {
		p.AnsweredAt = created.Add(-6 * time.Minute)
	})
	pb("answered-after-erasure", "a probe answered after the erasure", "statement.probes", func(p *attest.Probe) { p.AnsweredAt = created.Add(time.Second) })
	pb("not-utc", "a probe time with an offset of +01:00", "statement.probes", func(p *attest.Probe) {
		p.AnsweredAt = created.Add(-4 * time.Minute).In(time.FixedZone("", 3600))
	})
	pb("id-upper-hex", "a probe id in upper-case hex", "statement.probes", func(p *attest.Probe) { p.Probe = strings.Repeat("5E", 16) })
	pb("nonce-short", "a nonce of 62 hex digits", "statement.probes", func(p *attest.Probe) { p.Nonce = p.Nonce[:62] })
	g.bare("probe-id-repeated", "two probes with one id", "statement.probes", func(s *scene) {
		one := mk(s, nil)
		s.pred = func(p *attest.Predicate) { one(p); one(p) }
	}, nil)
	g.bare("probe-empty-list", "an empty probes list (the canonical statement omits it)", "json.schema", func(s *scene) {
		s.payload = sub(`}]}}`, `}],"probes":[]}}`)
	}, nil)
	g.bare("probe-unknown-field", "a probe with an unknown field (signed)", "json.schema", func(s *scene) {
		s.pred = mk(s, nil)
		s.payload = sub(`"found":[]`, `"found":[],"note":"x"`)
	}, nil)
	g.bare("probe-found-null", "a probe whose found is null, not [] (signed; lists are never null)", "json.schema", func(s *scene) {
		s.pred = mk(s, nil)
		s.payload = sub(`"found":[]`, `"found":null`)
	}, nil)
}
