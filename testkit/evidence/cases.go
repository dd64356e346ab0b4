package evidence

import (
	"bytes"
	"compress/flate"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/shredd/shredd/attest"
	"github.com/shredd/shredd/bundle"
	"github.com/shredd/shredd/testkeys"
)

// Case is one case of the corpus.
type Case struct {
	Name    string // NNN-slug, NNN its number in the corpus
	About   string
	Export  []byte
	Key     []byte // the attestation key file the verifier gives
	LogKey  []byte // the log key file the verifier gives
	Subject *string
	Salt    *string // hex
	Saved   []byte  // a checkpoint saved earlier; nil for none
	Verdict string  // "verified", "refused" or "usage"
	Reason  string  // bundle.Reason* ("ok" when verified, "usage" for a usage error)
	// Attestation, when set, is a bare attestation checked alone
	// (docs/transparency.md §10b): Export, LogKey and Saved are nil.
	Attestation []byte
	// Witnesses are the witness key files given; WitnessesRequired the
	// number required (nil: all of them).
	Witnesses         [][]byte
	WitnessesRequired *int
}

// inputs are what the verifier gives besides the export.
type inputs struct {
	key, logKey   []byte
	subject, salt *string
	saved         []byte
	witnesses     [][]byte
	required      *int
}

func (s *scene) inputs(b *built) inputs {
	subj, salt := s.subject, hex.EncodeToString(s.salt)
	return inputs{key: defaultKey(), logKey: defaultLogKey(), subject: &subj, salt: &salt, saved: b.saved}
}

func defaultKey() []byte { return mustPEM(testkeys.AttestationKey(0).Public().(ed25519.PublicKey)) }
func defaultLogKey() []byte {
	_, v := testkeys.LogKey()
	return []byte(v + "\n")
}

// export returns the archive of a built scene: the ustar members,
// compressed by compress/flate at its best level (its output has not
// changed across Go releases for years; the corpus test would say so).
func (b *built) export(dir string) []byte {
	return gzipWith(tarOf(b.members(dir)), 0, flate.BestCompression)
}

type gen struct {
	cases []Case
}

func (g *gen) add(slug, about, reason string, export []byte, in inputs) {
	g.cases = append(g.cases, Case{Name: fmt.Sprintf("%03d-%s", len(g.cases)+1, slug), About: about, Export: export,
		Key: in.key, LogKey: in.logKey, Subject: in.subject, Salt: in.salt, Saved: in.saved, Verdict: verdictOf(reason), Reason: reason,
		Witnesses: in.witnesses, WitnessesRequired: in.required})
}

func verdictOf(reason string) string {
	switch reason {
	case "ok":
		return "verified"
	case bundle.ReasonUsage:
		return "usage"
	}
	return "refused"
}

// scenario adds a case from a scene changed by mod (nil: unchanged), with
// the standard archive.
func (g *gen) scenario(slug, about, reason string, mod func(*scene)) {
	s := newScene()
	if mod != nil {
		mod(s)
	}
	b := s.build()
	g.add(slug, about, reason, b.export(s.dir), s.inputs(b))
}

// archive adds a case whose archive is made from the standard scene's
// files by mk.
func (g *gen) archive(slug, about, reason string, mk func(b *built, dir string) []byte) {
	s := newScene()
	b := s.build()
	g.add(slug, about, reason, mk(b, s.dir), s.inputs(b))
}

// withInputs adds a case of the standard export with the inputs changed.
func (g *gen) withInputs(slug, about, reason string, mod func(*inputs)) {
	s := newScene()
	b := s.build()
	in := s.inputs(b)
	mod(&in)
	g.add(slug, about, reason, b.export(s.dir), in)
}

func replaceFile(b *built, name string, f func([]byte) []byte) {
	for i := range b.files {
		if b.files[i].name == name {
			b.files[i].data = f(b.files[i].data)
			return
		}
	}
	panic("evidence: no file " + name)
}

func sub(old, new string) func([]byte) []byte {
	return func(b []byte) []byte {
		if !bytes.Contains(b, []byte(old)) {
			panic(fmt.Sprintf("evidence: %q not found", old))
		}
		return bytes.Replace(b, []byte(old), []byte(new), 1)
	}
}

// Cases returns the corpus, in its order.
func Cases() []Case {
	g := &gen{}
	g.valid()
	g.gzipCases()
	g.tarCases()
	g.layoutCases()
	g.keyCases()
	g.jsonCases()
	g.statementCases()
	g.logCases()
	g.bareCases()
	g.blankCases()
	g.fieldCases()
	g.noteCases()
	g.witnessCases()
	g.pathCases()
	g.boundCases()
	g.inputCases()
	g.probeCases()
	return g.cases
}

func str(s string) *string { return &s }

func (g *gen) valid() {
	g.scenario("valid", "a valid export, checked with the subject, the salt and a saved checkpoint", "ok", nil)
	g.withInputs("valid-no-subject", "a valid export checked without the subject", "ok", func(in *inputs) { in.subject, in.salt = nil, nil })
	g.withInputs("valid-no-saved", "a valid export checked without a saved checkpoint", "ok", func(in *inputs) { in.saved = nil })
	g.archive("valid-stored", "a valid export in stored (uncompressed) deflate blocks", "ok", func(b *built, dir string) []byte {
		return gzipStored(tarOf(b.members(dir)), uint32(created.Unix()))
	})
	g.archive("valid-compressed-fast", "a valid export compressed with Huffman-only deflate", "ok", func(b *built, dir string) []byte {
		return gzipWith(tarOf(b.members(dir)), 0, flate.HuffmanOnly)
	})
	g.archive("valid-fname", "a valid export whose gzip header names the file (FNAME)", "ok", func(b *built, dir string) []byte {
		return gzipWith(tarOf(b.members(dir)), 0x08, -10)
	})
	g.archive("valid-directory-member", "the top directory is a member of its own, as tar --format=ustar writes it", "ok", func(b *built, dir string) []byte {
		return gzipWith(tarOf(append([]member{{hdr: dirHeader(dir + "/")}}, b.members(dir)...)), 0, flate.BestCompression)
	})
	g.archive("valid-record-padding", "zero bytes after the end blocks up to a 10240-byte record, as GNU tar pads", "ok", func(b *built, dir string) []byte {
		t := tarOf(b.members(dir))
		return gzipWith(append(t, make([]byte, 10240-len(t)%10240)...), 0, flate.BestCompression)
	})
	g.archive("valid-ustar-prefix", "a name split between the ustar prefix and name fields", "ok", func(b *built, dir string) []byte {
		ms := b.members(dir)
		ms[1].hdr = prefixHeader(dir, "attestation.json", len(b.files[1].data))
		return gzipWith(tarOf(ms), 0, flate.BestCompression)
	})
	g.scenario("valid-same-size-saved", "the saved checkpoint is the export's own", "ok", func(s *scene) { s.savedAt = 7 })
	g.scenario("valid-epoch-max-safe", "an epoch of 2^53-1, the largest integer every reader holds", "ok", func(s *scene) { s.epoch = 1<<53 - 1 })
	g.scenario("valid-years-0-99", "a timeline in the years 0 to 99, in order", "ok", func(s *scene) {
		s.times = [4]string{"0000-03-01T00:00:00Z", "0050-01-01T00:00:00Z", "0099-12-31T23:59:59Z", "0099-12-31T23:59:59.5Z"}
	})
	g.scenario("valid-subject-nfc", "a subject id in NFC (é as one code point) typed in NFC", "ok", func(s *scene) { s.subject = "jos\u00e9@example.com" })
	g.scenario("valid-subject-line-break", "a subject id holding a line break, typed with it", "ok", func(s *scene) { s.subject = "line one\nline two" })
	g.scenario("valid-cosigned-checkpoint", "a checkpoint with a second signature by a key the verifier does not know", "ok", func(s *scene) {
		other, _ := newLogKey("evidence witness", "witness.example/w1")
		s.cpSigned = func(b []byte) []byte {
			n, err := note.Open(b, note.VerifierList(mustVerifier(defaultLogKey())))
			if err != nil {
				panic(err)
			}
			out, err := note.Sign(n, other)
			if err != nil {
				panic(err)
			}
			return out
		}
	})
	g.scenario("valid-signature-name-feff", "a second note signature whose name holds U+FEFF (not a space for Go's unicode.IsSpace)", "ok", func(s *scene) {
		s.cpSigned = addSigLine("\u2014 wit\ufeffness AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n")
	})
	g.archive("valid-proof-extra", "an inclusion proof with an extra line (unauthenticated, allowed by tlog-proof)", "ok", func(b *built, dir string) []byte {
		replaceFile(b, "entry-3-holder_ack.tlog-proof", sub("c2sp.org/tlog-proof@v1\n", "c2sp.org/tlog-proof@v1\nextra aGVsbG8=\n"))
		return b.export(dir)
	})
	g.scenario("valid-json-whitespace", "attestation.json with whitespace between tokens and a final newline", "ok", func(s *scene) {
		s.attestation = func(d []byte) []byte {
			return append(bytes.Replace(bytes.Replace(d, []byte(`,"payload"`), []byte(",\n  \"payload\""), 1), []byte(`{"payloadType"`), []byte("{ \"payloadType\""), 1), '\n')
		}
	})
	g.archive("valid-empty-readme", "an empty README.txt (not read by the verifier)", "ok", func(b *built, dir string) []byte {
		replaceFile(b, "README.txt", func([]byte) []byte { return []byte{} })
		return b.export(dir)
	})
	g.archive("valid-zero-block-mtime", "members whose header says mode 0 and mtime 0", "ok", func(b *built, dir string) []byte {
		ms := b.members(dir)
		for _, m := range ms {
			copy(m.hdr[100:108], "0000000\x00")
			copy(m.hdr[136:148], "00000000000\x00")
			setSum(m.hdr)
		}
		return gzipWith(tarOf(ms), 0, flate.BestCompression)
	})
	g.archive("valid-space-terminated-fields", "numeric fields ending in a space, as some tars write", "ok", func(b *built, dir string) []byte {
		ms := b.members(dir)
		for _, m := range ms {
			copy(m.hdr[100:108], "000644 \x00")
			setSum(m.hdr)
		}
		return gzipWith(tarOf(ms), 0, flate.BestCompression)
	})
}

func mustVerifier(vkey []byte) note.Verifier {
	v, err := note.NewVerifier(strings.TrimSpace(string(vkey)))
	if err != nil {
		panic(err)
	}
	return v
}

func addSigLine(line string) func([]byte) []byte {
	return func(b []byte) []byte { return append(b, line...) }
}

func gzipWith(data []byte, flg byte, level int) []byte {
	var out bytes.Buffer
	out.Write([]byte{0x1f, 0x8b, 8, flg, 0, 0, 0, 0, 0, 0xff})
	if flg&0x08 != 0 {
		out.WriteString("export.tar\x00")
	}
	if level == -10 {
		out.Write(deflateStored(data))
	} else {
		w, err := flate.NewWriter(&out, level)
		if err != nil {
			panic(err)
		}
		w.Write(data)
		w.Close()
	}
	binary.Write(&out, binary.LittleEndian, crc32.ChecksumIEEE(data))
	binary.Write(&out, binary.LittleEndian, uint32(len(data)))
	return out.Bytes()
}

func dirHeader(name string) []byte {
	h := header(name, 0, '5')
	copy(h[100:108], "0000755\x00")
	setSum(h)
	return h
}

func prefixHeader(dir, name string, size int) []byte {
	h := header(name, int64(size), '0')
	copy(h[345:500], dir)
	setSum(h)
	return h
}

func (g *gen) gzipCases() {
	tarOK := func() ([]byte, *built, *scene) {
		s := newScene()
		b := s.build()
		return tarOf(b.members(s.dir)), b, s
	}
	add := func(slug, about, reason string, f func(t []byte, gz []byte) []byte) {
		t, b, s := tarOK()
		g.add(slug, about, reason, f(t, gzipWith(t, 0, flate.BestCompression)), s.inputs(b))
	}
	add("gzip-empty", "an empty file", "gzip.header", func(t, gz []byte) []byte { return []byte{} })
	add("gzip-plain-tar", "the tar archive without gzip", "gzip.header", func(t, gz []byte) []byte { return t })
	add("gzip-bad-magic", "a wrong second magic byte", "gzip.header", func(t, gz []byte) []byte { gz[1] = 0x8c; return gz })
	add("gzip-method", "compression method 7, not deflate", "gzip.header", func(t, gz []byte) []byte { gz[2] = 7; return gz })
	add("gzip-fextra", "the FEXTRA flag", "gzip.header", func(t, gz []byte) []byte { gz[3] = 0x04; return gz })
	add("gzip-fcomment", "the FCOMMENT flag", "gzip.header", func(t, gz []byte) []byte { gz[3] = 0x10; return gz })
	add("gzip-fhcrc", "the FHCRC flag", "gzip.header", func(t, gz []byte) []byte { gz[3] = 0x02; return gz })
	add("gzip-reserved-flag", "a reserved flag bit", "gzip.header", func(t, gz []byte) []byte { gz[3] = 0x20; return gz })
	add("gzip-header-cut", "a gzip file of 6 bytes", "gzip.truncated", func(t, gz []byte) []byte { return gz[:6] })
	add("gzip-fname-unterminated", "an FNAME that never ends", "gzip.truncated", func(t, gz []byte) []byte {
		return append([]byte{0x1f, 0x8b, 8, 8, 0, 0, 0, 0, 0, 0xff}, "export.tar"...)
	})
	add("gzip-reserved-block", "a deflate block of the reserved type 3", "gzip.deflate", func(t, gz []byte) []byte { gz[10] = 0x07; return gz })
	add("gzip-stored-nlen", "a stored block whose NLEN is not the complement of LEN", "gzip.deflate", func(t, _ []byte) []byte {
		gz := gzipStored(t, 0)
		gz[13] ^= 1
		return gz
	})
	add("gzip-deflate-cut", "the deflate data cut in the middle", "gzip.deflate", func(t, gz []byte) []byte { return gz[:len(gz)/2] })
	add("gzip-trailer-cut-1", "the last byte of the trailer cut", "gzip.truncated", func(t, gz []byte) []byte { return gz[:len(gz)-1] })
	add("gzip-trailer-cut-4", "ISIZE cut", "gzip.truncated", func(t, gz []byte) []byte { return gz[:len(gz)-4] })
	add("gzip-trailer-cut-8", "no trailer at all", "gzip.truncated", func(t, gz []byte) []byte { return gz[:len(gz)-8] })
	add("gzip-bad-crc", "a wrong CRC-32", "gzip.crc", func(t, gz []byte) []byte { gz[len(gz)-8] ^= 0xff; return gz })
	add("gzip-bad-isize", "a wrong ISIZE", "gzip.size", func(t, gz []byte) []byte { gz[len(gz)-1] ^= 0x01; return gz })
	add("gzip-trailing-garbage", "text after the gzip member", "gzip.trailing", func(t, gz []byte) []byte { return append(gz, "garbage\n"...) })
	add("gzip-trailing-zero", "one zero byte after the gzip member", "gzip.trailing", func(t, gz []byte) []byte { return append(gz, 0) })
	add("gzip-trailing-1f", "one 0x1f byte after the gzip member", "gzip.trailing", func(t, gz []byte) []byte { return append(gz, 0x1f) })
	add("gzip-second-member-empty", "a second, empty gzip member (legal for gzip -d, refused here)", "gzip.multi-member", func(t, gz []byte) []byte {
		return append(gz, gzipStored(nil, 0)...)
	})
	add("gzip-second-member-copy", "the same archive twice as two gzip members", "gzip.multi-member", func(t, gz []byte) []byte {
		return append(gz, gz...)
	})
	add("gzip-second-member-tampered", "a second gzip member holding a tar with a tampered attestation.json (tar xizf extracts it)", "gzip.multi-member", func(t, gz []byte) []byte {
		s := newScene()
		s.times[0] = "2026-03-01T09:00:00Z"
		b := s.build()
		hidden := tarOf(b.members(s.dir)[1:2])
		return append(gz, gzipWith(hidden, 0, flate.BestCompression)...)
	})
	add("gzip-member-split", "the tar split into two gzip members (the second holding the end blocks)", "gzip.multi-member", func(t, gz []byte) []byte {
		return append(gzipWith(t[:len(t)-1024], 0, flate.BestCompression), gzipStored(t[len(t)-1024:], 0)...)
	})
}

func (g *gen) tarCases() {
	add := func(slug, about, reason string, f func(b *built, dir string, ms []member) []byte) {
		s := newScene()
		b := s.build()
		g.add(slug, about, reason, f(b, s.dir, b.members(s.dir)), s.inputs(b))
	}
	gz := func(t []byte) []byte { return gzipWith(t, 0, flate.BestCompression) }
	tampered := func() []byte {
		s := newScene()
		s.times[0] = "2026-03-01T09:00:00Z"
		return s.build().files[1].data
	}
	pax := func(typ byte, records string) member {
		m := member{hdr: header("PaxHeaders/attestation.json", int64(len(records)), typ), data: []byte(records)}
		return m
	}
	rec := func(k, v string) string {
		// the length counts itself, in bytes
		n := len(k) + len(v) + 3
		for {
			l := len(fmt.Sprint(n)) + len(k) + len(v) + 3
			if l == n {
				return fmt.Sprintf("%d %s=%s\n", n, k, v)
			}
			n = l
		}
	}
	insert := func(ms []member, at int, extra ...member) []member {
		out := append([]member{}, ms[:at]...)
		out = append(out, extra...)
		return append(out, ms[at:]...)
	}
	add("tar-pax-path", "a PAX header renaming a hidden member to attestation.json", "tar.pax", func(b *built, dir string, ms []member) []byte {
		ms[1] = regular(dir+"/attestation.orig", b.files[1].data)
		return gz(tarOf(insert(ms, 1, pax('x', rec("path", dir+"/attestation.json")))))
	})
	add("tar-pax-gnu-sparse-name", "a PAX header with GNU.sparse.name, which GNU tar uses as the name", "tar.pax", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(insert(ms, 1, pax('x', rec("GNU.sparse.name", dir+"/attestation.json")+rec("GNU.sparse.major", "1")))))
	})
	add("tar-pax-multibyte", "a PAX record with multi-byte characters (length in bytes, not UTF-16 units)", "tar.pax", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(insert(ms, 1, pax('x', rec("comment", "ünïcödé ✓")+rec("path", dir+"/attestation.json")))))
	})
	add("tar-pax-empty-size", "a PAX record size= with an empty value", "tar.pax", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(insert(ms, 1, pax('x', rec("size", "")))))
	})
	add("tar-pax-size", "a PAX size record that hides a tampered attestation behind the first", "tar.pax", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(insert(ms, 1, pax('x', rec("size", "0")))))
	})
	add("tar-pax-global", "a PAX global header", "tar.pax", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(insert(ms, 0, pax('g', rec("comment", "hello")))))
	})
	add("tar-gnu-longname", "a GNU long name record naming attestation.json", "tar.gnu", func(b *built, dir string, ms []member) []byte {
		name := dir + "/attestation.json\x00"
		l := member{hdr: header("././@LongLink", int64(len(name)), 'L'), data: []byte(name)}
		ms[1] = regular(dir+"/x", b.files[1].data)
		return gz(tarOf(insert(ms, 1, l)))
	})
	add("tar-gnu-longname-tampered", "a GNU long name record that renames a tampered attestation over the real one", "tar.gnu", func(b *built, dir string, ms []member) []byte {
		name := dir + "/attestation.json\x00"
		l := member{hdr: header("././@LongLink", int64(len(name)), 'L'), data: []byte(name)}
		return gz(tarOf(append(ms, l, regular(dir+"/x", tampered()))))
	})
	add("tar-gnu-longlink", "a GNU long link name record", "tar.gnu", func(b *built, dir string, ms []member) []byte {
		l := member{hdr: header("././@LongLink", 4, 'K'), data: []byte("abc\x00")}
		return gz(tarOf(insert(ms, 1, l)))
	})
	add("tar-gnu-sparse", "a GNU sparse member", "tar.gnu", func(b *built, dir string, ms []member) []byte {
		ms[1].hdr[156] = 'S'
		setSum(ms[1].hdr)
		return gz(tarOf(ms))
	})
	add("tar-gnu-magic", "a GNU tar header (magic \"ustar  \\0\"), the default of GNU tar", "tar.gnu", func(b *built, dir string, ms []member) []byte {
		copy(ms[0].hdr[257:265], "ustar  \x00")
		setSum(ms[0].hdr)
		return gz(tarOf(ms))
	})
	add("tar-v7", "a header without the ustar magic", "tar.magic", func(b *built, dir string, ms []member) []byte {
		copy(ms[0].hdr[257:265], make([]byte, 8))
		setSum(ms[0].hdr)
		return gz(tarOf(ms))
	})
	add("tar-ustar-version", "ustar magic with version \"  \"", "tar.magic", func(b *built, dir string, ms []member) []byte {
		copy(ms[0].hdr[263:265], "  ")
		setSum(ms[0].hdr)
		return gz(tarOf(ms))
	})
	add("tar-base256-size", "a base-256 size field", "tar.base256", func(b *built, dir string, ms []member) []byte {
		f := ms[1].hdr[124:136]
		for i := range f {
			f[i] = 0
		}
		f[0] = 0x80
		binary.BigEndian.PutUint64(f[4:], uint64(len(ms[1].data)))
		setSum(ms[1].hdr)
		return gz(tarOf(ms))
	})
	add("tar-base256-mtime", "a base-256 mtime field", "tar.base256", func(b *built, dir string, ms []member) []byte {
		f := ms[1].hdr[136:148]
		for i := range f {
			f[i] = 0
		}
		f[0] = 0x80
		binary.BigEndian.PutUint64(f[4:], uint64(created.Unix()))
		setSum(ms[1].hdr)
		return gz(tarOf(ms))
	})
	add("tar-signed-checksum", "a checksum computed over signed bytes (a name byte above 0x7f)", "tar.checksum", func(b *built, dir string, ms []member) []byte {
		copy(ms[0].hdr[265:297], "ren\xc3\xa9\x00")
		setSignedSum(ms[0].hdr)
		return gz(tarOf(ms))
	})
	add("tar-bad-checksum", "a wrong checksum", "tar.checksum", func(b *built, dir string, ms []member) []byte {
		ms[2].hdr[148] = '1'
		return gz(tarOf(ms))
	})
	add("tar-checksum-field", "a checksum field of spaces only", "tar.checksum", func(b *built, dir string, ms []member) []byte {
		copy(ms[0].hdr[148:156], "        ")
		return gz(tarOf(ms))
	})
	add("tar-uname-non-ascii", "a header whose owner name is not ASCII, with an unsigned checksum", "ok", func(b *built, dir string, ms []member) []byte {
		copy(ms[0].hdr[265:297], "ren\xc3\xa9\x00")
		setSum(ms[0].hdr)
		return gz(tarOf(ms))
	})
	for _, tc := range []struct {
		slug  string
		typ   byte
		about string
	}{
		{"tar-symlink", '2', "a symbolic link"}, {"tar-hardlink", '1', "a hard link"}, {"tar-chardev", '3', "a character device"},
		{"tar-blockdev", '4', "a block device"}, {"tar-fifo", '6', "a FIFO"}, {"tar-contiguous", '7', "a contiguous file (type 7)"},
		{"tar-unknown-type", 'Z', "an unknown type flag"},
	} {
		add(tc.slug, tc.about+" among the files", "tar.type", func(b *built, dir string, ms []member) []byte {
			h := header(dir+"/link", 0, tc.typ)
			if tc.typ == '1' || tc.typ == '2' {
				copy(h[157:257], "/etc/passwd")
				setSum(h)
			}
			return gz(tarOf(insert(ms, 2, member{hdr: h})))
		})
	}
	add("tar-symlink-over-key", "attestation.pub as a symbolic link", "tar.type", func(b *built, dir string, ms []member) []byte {
		h := header(dir+"/attestation.pub", 0, '2')
		copy(h[157:257], "/tmp/evil.pub")
		setSum(h)
		ms[2] = member{hdr: h}
		return gz(tarOf(ms))
	})
	add("tar-linkname-on-file", "a regular file with a link name", "tar.header", func(b *built, dir string, ms []member) []byte {
		copy(ms[1].hdr[157:257], "elsewhere")
		setSum(ms[1].hdr)
		return gz(tarOf(ms))
	})
	add("tar-size-not-octal", "a size field with the digit 8", "tar.header", func(b *built, dir string, ms []member) []byte {
		copy(ms[1].hdr[124:136], "00000000008\x00")
		setSum(ms[1].hdr)
		return gz(tarOf(ms))
	})
	add("tar-size-leading-space", "a size field with a leading space", "tar.header", func(b *built, dir string, ms []member) []byte {
		copy(ms[1].hdr[124:136], fmt.Sprintf(" %010o\x00", len(ms[1].data)))
		setSum(ms[1].hdr)
		return gz(tarOf(ms))
	})
	add("tar-mode-empty", "a mode field of NULs", "tar.header", func(b *built, dir string, ms []member) []byte {
		copy(ms[1].hdr[100:108], make([]byte, 8))
		setSum(ms[1].hdr)
		return gz(tarOf(ms))
	})
	add("tar-size-no-terminator", "a size field of twelve digits, no terminator", "tar.header", func(b *built, dir string, ms []member) []byte {
		copy(ms[1].hdr[124:136], fmt.Sprintf("%012o", len(ms[1].data)))
		setSum(ms[1].hdr)
		return gz(tarOf(ms))
	})
	add("tar-directory-with-data", "the top directory member with a size", "tar.header", func(b *built, dir string, ms []member) []byte {
		h := dirHeader(dir + "/")
		copy(h[124:136], "00000001000\x00")
		setSum(h)
		return gz(tarOf(insert(ms, 0, member{hdr: h, data: make([]byte, 512)})))
	})
	add("tar-nul-in-name", "a name with a NUL and more bytes after it (attestation.json\\0.bak)", "tar.path", func(b *built, dir string, ms []member) []byte {
		copy(ms[1].hdr[0:100], dir+"/attestation.json\x00.bak")
		setSum(ms[1].hdr)
		return gz(tarOf(ms))
	})
	add("tar-absolute", "an absolute path", "tar.path", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(append(ms, regular("/etc/cron.d/shredd", []byte("* * * * * root sh\n")))))
	})
	add("tar-dotdot", "a path with ..", "tar.path", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(append(ms, regular(dir+"/../attestation.json", []byte("{}")))))
	})
	add("tar-dotdot-only", "the path ..", "tar.path", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(append(ms, member{hdr: dirHeader("../")})))
	})
	add("tar-empty-name", "a member with an empty name", "tar.path", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(append(ms, regular("", []byte("x")))))
	})
	add("tar-name-not-utf8", "a name that is not UTF-8", "tar.path", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(append(ms, regular(dir+"/\xff\xfe", []byte("x")))))
	})
	add("tar-duplicate-same", "attestation.json twice with the same content", "tar.duplicate", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(append(ms, ms[1])))
	})
	add("tar-duplicate-tampered-last", "a tampered attestation.json after the real one (tar xf keeps the last)", "tar.duplicate", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(append(ms, regular(dir+"/attestation.json", tampered()))))
	})
	add("tar-duplicate-tampered-first", "a tampered attestation.json before the real one", "tar.duplicate", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(insert(ms, 1, regular(dir+"/attestation.json", tampered()))))
	})
	add("tar-duplicate-by-prefix", "attestation.json twice, once through the ustar prefix field", "tar.duplicate", func(b *built, dir string, ms []member) []byte {
		return gz(tarOf(append(ms, member{hdr: prefixHeader(dir, "attestation.json", len(b.files[1].data)), data: b.files[1].data})))
	})
	add("tar-duplicate-directory", "the top directory member twice", "tar.duplicate", func(b *built, dir string, ms []member) []byte {
		d := member{hdr: dirHeader(dir + "/")}
		return gz(tarOf(append([]member{d, d}, ms...)))
	})
	add("tar-no-end-blocks", "no end-of-archive blocks", "tar.end", func(b *built, dir string, ms []member) []byte {
		t := tarOf(ms)
		return gz(t[:len(t)-1024])
	})
	add("tar-one-end-block", "one end-of-archive block", "tar.end", func(b *built, dir string, ms []member) []byte {
		t := tarOf(ms)
		return gz(t[:len(t)-512])
	})
	add("tar-end-block-then-header", "one zero block, then more members", "tar.end", func(b *built, dir string, ms []member) []byte {
		t := tarOf(ms[:3])
		return gz(append(t[:len(t)-512], tarOf(ms[3:])...))
	})
	add("tar-after-end", "a member after the end blocks (hidden from tar, read by careless readers)", "tar.trailing", func(b *built, dir string, ms []member) []byte {
		return gz(append(tarOf(ms), tarOf([]member{regular(dir+"/attestation.json", tampered())})...))
	})
	add("tar-garbage-after-end", "text after the end blocks", "tar.trailing", func(b *built, dir string, ms []member) []byte {
		return gz(append(tarOf(ms), "trailing"...))
	})
	add("tar-cut-padding", "the archive cut inside a file's padding", "tar.truncated", func(b *built, dir string, ms []member) []byte {
		t := tarOf(ms[:2])
		return gz(t[:512+len(ms[0].data)+10])
	})
	add("tar-cut-data", "the archive cut inside a file's data", "tar.truncated", func(b *built, dir string, ms []member) []byte {
		t := tarOf(ms)
		return gz(t[:1024+len(ms[0].data)/2])
	})
	add("tar-cut-header", "the archive cut inside a header", "tar.truncated", func(b *built, dir string, ms []member) []byte {
		t := tarOf(ms)
		return gz(t[:100])
	})
	add("tar-size-beyond", "a size field larger than the archive", "tar.truncated", func(b *built, dir string, ms []member) []byte {
		copy(ms[len(ms)-1].hdr[124:136], "00077777777\x00")
		setSum(ms[len(ms)-1].hdr)
		return gz(tarOf(ms))
	})
	add("tar-oversized", "a size field over 64 MiB", "bundle.size", func(b *built, dir string, ms []member) []byte {
		copy(ms[1].hdr[124:136], fmt.Sprintf("%011o\x00", 64<<20+1))
		setSum(ms[1].hdr)
		return gz(tarOf(ms[:2]))
	})
}

func (g *gen) layoutCases() {
	add := func(slug, about, reason string, f func(b *built, dir string, ms []member) []member) {
		s := newScene()
		b := s.build()
		g.add(slug, about, reason, gzipWith(tarOf(f(b, s.dir, b.members(s.dir))), 0, flate.BestCompression), s.inputs(b))
	}
	add("layout-top-level-file", "a file at the top of the archive", "bundle.layout", func(b *built, dir string, ms []member) []member {
		return append(ms, regular("attestation.json", []byte("{}")))
	})
	add("layout-subdirectory", "a file in a subdirectory", "bundle.layout", func(b *built, dir string, ms []member) []member {
		return append(ms, regular(dir+"/sub/attestation.json", []byte("{}")))
	})
	add("layout-other-directory", "a directory member other than the top one", "bundle.layout", func(b *built, dir string, ms []member) []member {
		return append(ms, member{hdr: dirHeader(dir + "/sub/")})
	})
	add("layout-two-exports", "files of two exports", "bundle.layout", func(b *built, dir string, ms []member) []member {
		return append(ms, regular("shredd-export-"+strings.Repeat("0", 32)+"/README.txt", []byte("hi")))
	})
	add("layout-bad-directory", "a top directory that is not shredd-export-<32 hex digits>", "bundle.layout", func(b *built, dir string, ms []member) []member {
		for i, f := range b.files {
			ms[i] = regular("shredd-export-XYZ/"+f.name, f.data)
		}
		return ms
	})
	add("layout-upper-hex", "a forget id in upper-case hex", "bundle.layout", func(b *built, dir string, ms []member) []member {
		for i, f := range b.files {
			ms[i] = regular(strings.ToUpper(dir[:0])+"shredd-export-"+strings.ToUpper(forgetID)+"/"+f.name, f.data)
		}
		return ms
	})
	add("layout-unknown-file", "an unknown file", "bundle.unknown-file", func(b *built, dir string, ms []member) []member {
		return append(ms, regular(dir+"/notes.txt", []byte("trust me")))
	})
	add("layout-entry-leading-zero", "an entry name with a leading zero", "bundle.unknown-file", func(b *built, dir string, ms []member) []member {
		return append(ms, regular(dir+"/entry-01-key_created.json", []byte("{}")))
	})
	add("layout-entry-extension", "an entry file with another extension", "bundle.unknown-file", func(b *built, dir string, ms []member) []member {
		return append(ms, regular(dir+"/entry-3-holder_ack.sig", []byte("x")))
	})
	add("layout-entry-huge-index", "an entry index beyond 2^53-1", "bundle.unknown-file", func(b *built, dir string, ms []member) []member {
		return append(ms, regular(dir+"/entry-9007199254740993-holder_ack.json", []byte("{}")))
	})
	add("layout-oversized-entry", "an entry over 65535 bytes", "bundle.size", func(b *built, dir string, ms []member) []member {
		for i, f := range b.files {
			if f.name == "entry-3-holder_ack.json" {
				ms[i] = regular(dir+"/"+f.name, bytes.Repeat([]byte(" "), 65536))
			}
		}
		return ms
	})
	for _, name := range []string{"README.txt", "attestation.json", "attestation.pub", "log.vkey", "checkpoint", "check-inclusion.py"} {
		add("layout-missing-"+strings.ReplaceAll(name, ".", "-"), name+" is missing", "bundle.missing-file", func(b *built, dir string, ms []member) []member {
			var out []member
			for i, f := range b.files {
				if f.name != name {
					out = append(out, ms[i])
				}
			}
			return out
		})
	}
	for _, name := range []string{"entry-3-holder_ack.tlog-proof", "entry-3-holder_ack.json"} {
		add("layout-missing-"+strings.ReplaceAll(name, ".", "-"), "an entry with only one of its two files", "bundle.missing-file", func(b *built, dir string, ms []member) []member {
			var out []member
			for i, f := range b.files {
				if f.name != name {
					out = append(out, ms[i])
				}
			}
			return out
		})
	}
	add("layout-empty-archive", "a tar with the end blocks only", "bundle.missing-file", func(b *built, dir string, ms []member) []member { return nil })
}

func (g *gen) keyCases() {
	pem := defaultKey()
	g.withInputs("key-trailing", "the given key file with text after the PEM block", "key.trailing", func(in *inputs) {
		in.key = append(append([]byte{}, pem...), "comment\n"...)
	})
	g.withInputs("key-second-block", "the given key file with a second PEM block", "key.trailing", func(in *inputs) {
		in.key = append(append([]byte{}, pem...), mustPEM(testkeys.AttestationKey(3).Public().(ed25519.PublicKey))...)
	})
	g.withInputs("key-trailing-blank-line", "the given key file with an empty line after the PEM block", "key.trailing", func(in *inputs) {
		in.key = append(append([]byte{}, pem...), '\n')
	})
	g.withInputs("key-comment-before", "a comment before the PEM block (Go's pem.Decode would skip it)", "key.leading", func(in *inputs) {
		in.key = append([]byte("# shredd attestation key\n"), pem...)
	})
	g.withInputs("key-bom", "the given key file starting with a UTF-8 BOM", "text.bom", func(in *inputs) {
		in.key = append([]byte("\xef\xbb\xbf"), pem...)
	})
	g.withInputs("key-crlf", "the given key file with CRLF line ends", "key.format", func(in *inputs) {
		in.key = bytes.ReplaceAll(pem, []byte("\n"), []byte("\r\n"))
	})
	g.withInputs("key-no-final-newline", "the given key file without its final newline", "key.format", func(in *inputs) {
		in.key = bytes.TrimSuffix(pem, []byte("\n"))
	})
	g.withInputs("key-not-ed25519", "a P-256 public key", "key.format", func(in *inputs) {
		in.key = []byte("-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEb1Yp9aHmW8cE+gvCXvMpdkXRK0vzGrq0mEtUgT2mPxkCY84PsOY7eRVW7GRZx0Cq7mT7tLw+yJD2DNjUE2DW8A==\n-----END PUBLIC KEY-----\n")
	})
	g.withInputs("key-private", "a private key in place of the public one", "key.format", func(in *inputs) {
		b, _ := attest.MarshalPrivateKey(testkeys.AttestationKey(0))
		in.key = b
	})
	g.withInputs("key-headers", "a PEM block with a header line", "key.format", func(in *inputs) {
		in.key = bytes.Replace(pem, []byte("KEY-----\n"), []byte("KEY-----\nComment: hi\n\n"), 1)
	})
	g.withInputs("key-not-utf8", "a key file with a byte that is not UTF-8", "text.utf8", func(in *inputs) {
		in.key = append([]byte{0xff}, pem...)
	})
	g.withInputs("key-other", "another Ed25519 key than the service's", "envelope.signature", func(in *inputs) {
		in.key = mustPEM(testkeys.AttestationKey(2).Public().(ed25519.PublicKey))
	})
	g.withInputs("logkey-trailing", "the given log key file with a second line", "logkey.format", func(in *inputs) {
		in.logKey = append(append([]byte{}, in.logKey...), "more\n"...)
	})
	g.withInputs("logkey-bom", "the given log key file starting with a BOM", "text.bom", func(in *inputs) {
		in.logKey = append([]byte("\xef\xbb\xbf"), in.logKey...)
	})
	g.withInputs("logkey-crlf", "the given log key file ending in CRLF", "logkey.format", func(in *inputs) {
		in.logKey = append(bytes.TrimSuffix(in.logKey, []byte("\n")), "\r\n"...)
	})
	g.withInputs("logkey-malformed", "a log key that is not a note verifier key", "logkey.format", func(in *inputs) {
		in.logKey = []byte("shredd/0123456789abcdef+00000000+AQ==\n")
	})
	g.withInputs("logkey-other-key", "another log key of the same origin", "checkpoint.signature", func(in *inputs) {
		_, v := newLogKey("evidence other key same origin", testkeys.LogOrigin)
		in.logKey = []byte(v + "\n")
	})
	g.withInputs("logkey-other-origin", "the key of another log", "checkpoint.signature", func(in *inputs) {
		_, v := newLogKey("evidence other log", "shredd/other-log")
		in.logKey = []byte(v + "\n")
	})
	g.withInputs("logkey-no-newline", "a log key file without a final newline", "ok", func(in *inputs) {
		in.logKey = bytes.TrimSuffix(in.logKey, []byte("\n"))
	})
	g.archive("export-key-trailing", "the export's attestation.pub with data after the PEM block (not read: the verifier gives its keys)", "ok", func(b *built, dir string) []byte {
		replaceFile(b, "attestation.pub", func(d []byte) []byte { return append(d, "x"...) })
		return b.export(dir)
	})
	g.archive("export-key-comment", "the export's attestation.pub with a comment before the PEM block (not read)", "ok", func(b *built, dir string) []byte {
		replaceFile(b, "attestation.pub", func(d []byte) []byte { return append([]byte("service key:\n"), d...) })
		return b.export(dir)
	})
	g.archive("export-logkey-two-lines", "the export's log.vkey with two lines (not read)", "ok", func(b *built, dir string) []byte {
		replaceFile(b, "log.vkey", func(d []byte) []byte { return append(d, d...) })
		return b.export(dir)
	})
	g.archive("export-key-other", "the export's attestation.pub is another key (the given key is used)", "ok", func(b *built, dir string) []byte {
		replaceFile(b, "attestation.pub", func([]byte) []byte { return mustPEM(testkeys.AttestationKey(2).Public().(ed25519.PublicKey)) })
		return b.export(dir)
	})
}

// envelope JSON cases: attestation.json after signing.
func (g *gen) jsonCases() {
	att := func(slug, about, reason string, f func([]byte) []byte) {
		g.scenario(slug, about, reason, func(s *scene) { s.attestation = f })
	}
	att("json-bom", "attestation.json starting with a UTF-8 BOM", "json.bom", func(b []byte) []byte { return append([]byte("\xef\xbb\xbf"), b...) })
	att("json-not-utf8", "attestation.json with a byte that is not UTF-8 in whitespace position", "json.utf8", func(b []byte) []byte { return append(b, 0xff) })
	att("json-overlong-utf8", "an overlong UTF-8 encoding", "json.utf8", func(b []byte) []byte { return append(b, 0xc0, 0xaf) })
	att("json-encoded-surrogate", "a surrogate encoded in UTF-8 (CESU)", "json.utf8", func(b []byte) []byte {
		return sub(`{"payloadType"`, "{\"\xed\xa0\x80\":1,\"payloadType\"")(b)
	})
	att("json-trailing-data", "text after the envelope", "json.trailing", func(b []byte) []byte { return append(b, "x"...) })
	att("json-trailing-value", "a second JSON value after the envelope", "json.trailing", func(b []byte) []byte { return append(b, "{}"...) })
	att("json-trailing-nul", "a NUL after the envelope", "json.trailing", func(b []byte) []byte { return append(b, 0) })
	att("json-duplicate-payloadtype", "payloadType twice with different values", "json.duplicate-key", sub(`{"payloadType":"application/vnd.in-toto+json"`,
		`{"payloadType":"text/plain","payloadType":"application/vnd.in-toto+json"`))
	att("json-duplicate-same", "payloadType twice with the same value", "json.duplicate-key", sub(`{"payloadType":"application/vnd.in-toto+json"`,
		`{"payloadType":"application/vnd.in-toto+json","payloadType":"application/vnd.in-toto+json"`))
	att("json-duplicate-escaped", "a duplicate key spelled with an escape", "json.duplicate-key", sub(`{"payloadType":"application/vnd.in-toto+json"`,
		`{"payloadType":"application/vnd.in-toto+json","p\u0061yloadType":"x"`))
	att("json-duplicate-nested", "keyid twice inside the signature", "json.duplicate-key", sub(`"keyid":`, `"keyid":"00","keyid":`))
	att("json-unknown-field", "an unknown field in the envelope", "json.schema", sub(`{"payloadType"`, `{"x":"y","payloadType"`))
	att("json-case-folded-key", "a key in another case (Go's decoder folds it)", "json.schema", sub(`"payloadType"`, `"PayloadType"`))
	att("json-escaped-key", "a key spelled with an escape", "json.schema", sub(`"payloadType"`, `"p\u0061yloadType"`))
	att("json-float", "a number with a fraction", "json.number", sub(`{"payloadType"`, `{"x":1.5,"payloadType"`))
	att("json-exponent", "a number with an exponent", "json.number", sub(`{"payloadType"`, `{"x":1e3,"payloadType"`))
	att("json-2-53", "the integer 2^53", "json.number", sub(`{"payloadType"`, `{"x":9007199254740992,"payloadType"`))
	att("json-2-53-negative", "the integer -2^53", "json.number", sub(`{"payloadType"`, `{"x":-9007199254740992,"payloadType"`))
	att("json-2-53-minus-1", "the integer 2^53-1 in an unknown field (a schema error, not a number error)", "json.schema", sub(`{"payloadType"`, `{"x":9007199254740991,"payloadType"`))
	att("json-lone-surrogate", "a lone surrogate escape", "json.utf8", sub(`{"payloadType"`, `{"\ud800":1,"payloadType"`))
	att("json-lone-low-surrogate", "a lone low surrogate escape", "json.utf8", sub(`{"payloadType"`, `{"\udc00x":1,"payloadType"`))
	att("json-syntax", "a missing closing brace", "json.syntax", func(b []byte) []byte { return b[:len(b)-1] })
	att("json-single-quotes", "a string in single quotes", "json.syntax", sub(`{"payloadType"`, `{'x':1,"payloadType"`))
	att("json-leading-zero", "an integer with a leading zero", "json.syntax", sub(`{"payloadType"`, `{"x":01,"payloadType"`))
	att("json-nan", "NaN", "json.syntax", sub(`{"payloadType"`, `{"x":NaN,"payloadType"`))
	att("json-raw-control", "a raw tab inside a string", "json.syntax", sub(`"payloadType":"application`, "\"payloadType\":\"\tapplication"))
	att("json-deep", "arrays nested 65 deep", "json.syntax", sub(`{"payloadType"`, `{"x":`+strings.Repeat("[", 65)+strings.Repeat("]", 65)+`,"payloadType"`))
	att("json-comment", "a comment", "json.syntax", sub(`{"payloadType"`, `{/* hi */"payloadType"`))
	att("json-empty", "an empty attestation.json", "json.syntax", func([]byte) []byte { return []byte{} })
	att("json-payload-type", "another payload type", "envelope.format", sub(`"application/vnd.in-toto+json"`, `"application/json"`))
	att("json-two-signatures", "two signatures", "envelope.format", func(b []byte) []byte {
		i := bytes.Index(b, []byte(`"signatures":[`)) + len(`"signatures":[`)
		j := bytes.LastIndex(b, []byte("]"))
		sig := string(b[i:j])
		return []byte(string(b[:i]) + sig + "," + sig + string(b[j:]))
	})
	att("json-no-signature", "no signature", "envelope.format", func(b []byte) []byte {
		i := bytes.Index(b, []byte(`"signatures":[`)) + len(`"signatures":[`)
		j := bytes.LastIndex(b, []byte("]"))
		return []byte(string(b[:i]) + string(b[j:]))
	})
	att("json-bad-signature", "a signature that does not verify", "envelope.signature", func(b []byte) []byte {
		i := bytes.Index(b, []byte(`"sig":"`)) + len(`"sig":"`)
		c := append([]byte{}, b...)
		if c[i] == 'A' {
			c[i] = 'B'
		} else {
			c[i] = 'A'
		}
		return c
	})
	att("json-other-keyid", "a key id that is not the key's", "envelope.signature", func(b []byte) []byte {
		i := bytes.Index(b, []byte(`"keyid":"`)) + len(`"keyid":"`)
		c := append([]byte{}, b...)
		c[i] = 'f' + '0' - c[i]
		if c[i] == b[i] {
			c[i] = '0'
		}
		return c
	})
	att("json-base64-newline", "the payload's base64 with an escaped line break", "json.schema", func(b []byte) []byte {
		i := bytes.Index(b, []byte(`"payload":"`)) + len(`"payload":"`) + 40
		return []byte(string(b[:i]) + `\n` + string(b[i:]))
	})
	att("json-payload-escaped-slash", "a / written as \\/ in the payload type", "json.schema", sub(`application/vnd`, `application\/vnd`))
	g.scenario("json-signed-by-other", "an attestation signed by another key with its own key id", "envelope.signature", func(s *scene) {
		s.attestation = func(b []byte) []byte {
			st := s.statement()
			return signEnvelope(attest.PayloadType, st, testkeys.AttestationKey(2))
		}
	})
}

// statement cases: the payload, re-signed with the service's key.
func (g *gen) statementCases() {
	pl := func(slug, about, reason string, f func([]byte) []byte) {
		g.scenario(slug, about, reason, func(s *scene) { s.payload = f })
	}
	pl("statement-bom", "the statement starting with a BOM (signed)", "json.bom", func(b []byte) []byte { return append([]byte("\xef\xbb\xbf"), b...) })
	pl("statement-trailing", "the statement with a second value after it (signed)", "json.trailing", func(b []byte) []byte { return append(b, "{}"...) })
	pl("statement-duplicate-claim", "claim twice with different values (signed)", "json.duplicate-key", sub(`"claim":"cryptographically erased"`,
		`"claim":"not erased","claim":"cryptographically erased"`))
	pl("statement-duplicate-claim-reversed", "claim twice, the erasure claim first (signed)", "json.duplicate-key", sub(`"claim":"cryptographically erased"`,
		`"claim":"cryptographically erased","claim":"not erased"`))
	pl("statement-duplicate-subject", "the subject twice, two commitments (signed)", "json.duplicate-key", sub(`"subject":[`,
		`"subject":[{"name":"subject-commitment","digest":{"sha256":"`+strings.Repeat("0", 64)+`"}}],"subject":[`))
	pl("statement-duplicate-deep", "a duplicate key inside a condition (signed)", "json.duplicate-key", sub(`"status":"ok"`, `"status":"failed","status":"ok"`))
	pl("statement-unknown-field", "an unknown field in the predicate (signed)", "json.schema", sub(`"claim":`, `"note":"x","claim":`))
	pl("statement-whitespace", "the statement with whitespace (signed; the payload must be canonical)", "json.schema", sub(`"claim":`, `"claim": `))
	pl("statement-epoch-2-53", "an epoch of 2^53 (signed)", "json.number", sub(`"epoch":1`, `"epoch":9007199254740992`))
	pl("statement-epoch-2-53-plus-1", "an epoch of 2^53+1 (signed; JavaScript rounds it)", "json.number", sub(`"epoch":1`, `"epoch":9007199254740993`))
	pl("statement-epoch-huge", "an epoch of 20 digits (signed)", "json.number", sub(`"epoch":1`, `"epoch":18446744073709551617`))
	pl("statement-epoch-float", "an epoch of 1.0 (signed)", "json.number", sub(`"epoch":1`, `"epoch":1.0`))
	pl("statement-epoch-negative", "an epoch of -1 (signed)", "statement.format", sub(`"epoch":1`, `"epoch":-1`))
	pl("statement-predicate-type", "an unknown predicate type (signed)", "statement.format", sub(`"https://shredd.dev/attestation/erasure/v1"`, `"https://shredd.dev/attestation/erasure/v2"`))
	pl("statement-type", "another statement _type (signed)", "statement.format", sub(`"https://in-toto.io/Statement/v1"`, `"https://in-toto.io/Statement/v0.1"`))
	pl("statement-claim", "another claim (signed)", "statement.claim", sub(`"cryptographically erased"`, `"erased"`))
	pl("statement-condition-failed", "a condition not ok (signed)", "statement.conditions", sub(`"status":"ok"`, `"status":"failed"`))
	pl("statement-residual-missing", "the holder_trust residual removed (signed)", "statement.residuals", func(b []byte) []byte {
		i := bytes.Index(b, []byte(`,{"kind":"holder_trust"`))
		j := bytes.Index(b[i+1:], []byte("}")) + i + 2
		return append(append([]byte{}, b[:i]...), b[j:]...)
	})
	pl("statement-key-exportable", "key evidence naming an exportable root key (signed)", "statement.key-evidence", sub(`"epoch":1}`,
		`"root_key_config":{"name":"root","type":"aes256-gcm96","exportable":true,"allow_plaintext_backup":false,"min_available_version":0,"latest_version":2},"epoch":1}`))
	pl("statement-ack-bad", "a holder ack whose signature does not verify (signed)", "statement.acks", func(b []byte) []byte {
		i := bytes.Index(b, []byte(`"signature":"`)) + len(`"signature":"`)
		j := bytes.Index(b[i:], []byte(`"`)) + i
		sig, _ := base64.StdEncoding.DecodeString(string(b[i:j]))
		sig[0] ^= 1
		enc := base64.StdEncoding.EncodeToString(sig)
		// the artifact's ack_signature is the same signature
		return bytes.ReplaceAll(b, b[i:j], []byte(enc))
	})
	g.scenario("statement-requested-zero", "a zero requested time (Go's zero time, signed)", "statement.timeline", func(s *scene) { s.times[0] = "0001-01-01T00:00:00Z" })
	g.scenario("statement-requested-zero-offset", "the zero instant written with an offset (signed)", "statement.timeline", func(s *scene) { s.times[0] = "0001-01-01T01:00:00+01:00" })
	g.scenario("statement-year-99-after-1999", "committed in year 0099 after a request in 1999 (signed; 0099 is not 1999)", "statement.timeline", func(s *scene) {
		s.times = [4]string{"1999-06-01T00:00:00Z", "0099-06-02T00:00:00Z", "2026-03-01T09:56:30Z", "2026-03-01T10:06:30Z"}
	})
	g.scenario("statement-year-50-order", "requested in year 2050, committed in 0050 (signed)", "statement.timeline", func(s *scene) {
		s.times[0] = "2050-01-01T00:00:00Z"
		s.times[1] = "0050-01-01T00:00:00Z"
	})
	g.scenario("statement-out-of-order", "erased before shredded (signed)", "statement.timeline", func(s *scene) {
		s.times[3] = "2026-03-01T09:00:00Z"
	})
	g.scenario("statement-not-utc", "a time with an offset of +01:00 (signed)", "statement.timeline", func(s *scene) { s.times[1] = "2026-03-01T10:36:30+01:00" })
	g.scenario("statement-offset-zero", "a time written +00:00 (signed; Go writes Z)", "json.schema", func(s *scene) { s.times[1] = "2026-03-01T09:36:30+00:00" })
	g.scenario("statement-lower-t", "a time with a lower-case t (signed)", "json.schema", func(s *scene) { s.times[1] = "2026-03-01t09:36:30Z" })
	g.scenario("statement-fraction-zeros", "a time with trailing zeros in its fraction (signed)", "json.schema", func(s *scene) { s.times[1] = "2026-03-01T09:36:30.500Z" })
	g.scenario("statement-leap-second", "a time at second 60 (signed)", "json.schema", func(s *scene) { s.times[1] = "2026-03-01T09:36:60Z" })
	g.scenario("statement-feb-30", "February 30 (signed)", "json.schema", func(s *scene) { s.times[1] = "2026-02-30T09:36:30Z" })
	g.scenario("statement-other-forget", "a statement about another forget than the export's directory", "statement.forget", func(s *scene) {
		s.dir = "shredd-export-" + strings.Repeat("ab", 16)
	})
	// Subjects: the statement commits to one subject; another is typed.
	subj := func(slug, about, reason, committed, typed string) {
		s := newScene()
		s.subject = committed
		b := s.build()
		in := s.inputs(b)
		in.subject = str(typed)
		g.add(slug, about, reason, b.export(s.dir), in)
	}
	subj("subject-other", "a statement for another subject than the one typed", "subject.mismatch", "bob@example.com", subject)
	subj("subject-nfd", "committed in NFC, typed in NFD (e + combining acute)", "subject.mismatch", "jos\u00e9@example.com", "jose\u0301@example.com")
	subj("subject-nfc-typed", "committed in NFD, typed in NFC", "subject.mismatch", "jose\u0301@example.com", "jos\u00e9@example.com")
	subj("subject-nfd-both", "committed and typed in NFD", "ok", "jose\u0301@example.com", "jose\u0301@example.com")
	subj("subject-cyrillic-a", "a Cyrillic а in place of the Latin a", "subject.mismatch", subject, "\u0430lice@example.com")
	subj("subject-fullwidth", "a fullwidth ａ in place of a", "subject.mismatch", subject, "\uff41lice@example.com")
	subj("subject-case", "the subject typed in another case", "subject.mismatch", subject, "Alice@example.com")
	subj("subject-trailing-space", "the subject typed with a trailing space", "subject.mismatch", subject, subject+" ")
	subj("subject-trailing-newline", "the subject typed with a trailing line break", "subject.mismatch", subject, subject+"\n")
	subj("subject-zero-width", "a zero-width space inside the typed subject", "subject.mismatch", subject, "alice\u200b@example.com")
	subj("subject-line-break-missing", "committed with a line break, typed without", "subject.mismatch", "line one\nline two", "line oneline two")
	subj("subject-crlf", "committed with LF, typed with CRLF", "subject.mismatch", "line one\nline two", "line one\r\nline two")
	s := newScene()
	b := s.build()
	in := s.inputs(b)
	in.salt = str(hex.EncodeToString(fixed("another salt")))
	g.add("subject-wrong-salt", "the right subject with another salt", "subject.mismatch", b.export(s.dir), in)
}

func (g *gen) logCases() {
	g.scenario("checkpoint-bom", "the checkpoint starting with a BOM", "text.bom", func(s *scene) {
		s.cpSigned = func(b []byte) []byte { return append([]byte("\xef\xbb\xbf"), b...) }
	})
	g.scenario("checkpoint-bad-signature", "a checkpoint signature that does not verify", "checkpoint.signature", func(s *scene) {
		s.cpSigned = func(b []byte) []byte {
			c := append([]byte{}, b...)
			i := bytes.LastIndex(c, []byte(" ")) + 10
			c[i] ^= 0x01
			if c[i] == '\n' || c[i] == '+' || c[i] == '/' || c[i] == '=' {
				c[i] = 'A'
			}
			return c
		}
	})
	g.scenario("checkpoint-other-key", "a checkpoint signed by another key of the same origin", "checkpoint.signature", func(s *scene) {
		s.signer, _ = newLogKey("evidence rogue key", testkeys.LogOrigin)
	})
	g.scenario("checkpoint-other-log", "a checkpoint of another log (its own origin and key)", "checkpoint.signature", func(s *scene) {
		s.signer, _ = newLogKey("evidence other log 2", "shredd/another-log")
	})
	g.scenario("checkpoint-other-origin", "a checkpoint text of another origin, signed by the log key", "checkpoint.origin", func(s *scene) {
		s.cpText = func(t string) string { return strings.Replace(t, testkeys.LogOrigin, "shredd/fedcba9876543210", 1) }
	})
	g.scenario("checkpoint-size-2-53-plus-1", "a tree size of 2^53+1, signed", "checkpoint.format", func(s *scene) {
		s.cpText = func(t string) string { return strings.Replace(t, "\n7\n", "\n9007199254740993\n", 1) }
	})
	g.scenario("checkpoint-size-leading-zero", "a tree size with a leading zero, signed", "checkpoint.format", func(s *scene) {
		s.cpText = func(t string) string { return strings.Replace(t, "\n7\n", "\n07\n", 1) }
	})
	g.scenario("checkpoint-no-signatures", "a checkpoint without its signature block", "checkpoint.format", func(s *scene) {
		s.cpSigned = func(b []byte) []byte { return b[:bytes.Index(b, []byte("\n\n"))+1] }
	})
	g.scenario("checkpoint-crlf", "a checkpoint with CRLF line ends", "checkpoint.format", func(s *scene) {
		s.cpSigned = func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")) }
	})
	g.scenario("checkpoint-signature-name-nel", "a second signature whose name holds U+0085 (a space for Go)", "checkpoint.format", func(s *scene) {
		s.cpSigned = addSigLine("\u2014 wit\u0085ness AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n")
	})
	g.scenario("checkpoint-signature-name-nbsp", "a second signature whose name holds U+00A0", "checkpoint.format", func(s *scene) {
		s.cpSigned = addSigLine("\u2014 wit\u00a0ness AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n")
	})
	g.scenario("checkpoint-signature-name-plus", "a second signature whose name holds a +", "checkpoint.format", func(s *scene) {
		s.cpSigned = addSigLine("\u2014 wit+ness AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n")
	})
	g.scenario("checkpoint-signature-short", "a second signature of 4 bytes", "checkpoint.format", func(s *scene) {
		s.cpSigned = addSigLine("\u2014 witness AAAAAA==\n")
	})
	g.scenario("checkpoint-signature-hyphen", "a signature line starting with a hyphen, not an em dash", "checkpoint.format", func(s *scene) {
		s.cpSigned = func(b []byte) []byte { return bytes.Replace(b, []byte("\u2014 "), []byte("- "), 1) }
	})
	g.scenario("checkpoint-extension", "a checkpoint with an extension line, signed", "ok", func(s *scene) {
		s.cpText = func(t string) string { return t + "extension line\n" }
	})
	// Inclusion proofs.
	g.scenario("proof-other-leaf", "the holder ack's inclusion proof is the forget's (a proof for another leaf)", "proof.inclusion", func(s *scene) {
		var forgetProof []byte
		s.proofs = func(idx int64, p []byte) []byte {
			if idx == 2 {
				forgetProof = p
			}
			if idx == 3 {
				return bytes.Replace(forgetProof, []byte("index 2\n"), []byte("index 3\n"), 1)
			}
			return p
		}
	})
	g.scenario("proof-bad-hash", "an inclusion proof with one hash changed", "proof.inclusion", func(s *scene) {
		s.proofs = func(idx int64, p []byte) []byte {
			if idx == 3 {
				return flipHash(p, "index 3\n")
			}
			return p
		}
	})
	g.scenario("proof-index", "a proof of another index than its file's", "proof.index", func(s *scene) {
		s.proofs = func(idx int64, p []byte) []byte {
			if idx == 3 {
				return bytes.Replace(p, []byte("index 3\n"), []byte("index 4\n"), 1)
			}
			return p
		}
	})
	g.scenario("proof-index-2-53", "a proof index of 2^53", "proof.format", func(s *scene) {
		s.proofs = func(idx int64, p []byte) []byte {
			if idx == 3 {
				return bytes.Replace(p, []byte("index 3\n"), []byte("index 9007199254740992\n"), 1)
			}
			return p
		}
	})
	g.scenario("proof-malformed", "a proof without its header line", "proof.format", func(s *scene) {
		s.proofs = func(idx int64, p []byte) []byte {
			if idx == 3 {
				return bytes.TrimPrefix(p, []byte("c2sp.org/tlog-proof@v1\n"))
			}
			return p
		}
	})
	g.scenario("proof-bom", "a proof starting with a BOM", "text.bom", func(s *scene) {
		s.proofs = func(idx int64, p []byte) []byte {
			if idx == 3 {
				return append([]byte("\xef\xbb\xbf"), p...)
			}
			return p
		}
	})
	g.scenario("proof-other-checkpoint", "a proof against another (older, validly signed) checkpoint", "proof.checkpoint", func(s *scene) {
		var cps [][]byte
		s.cpSigned = func(b []byte) []byte { cps = append(cps, b); return b }
		s.proofs = func(idx int64, p []byte) []byte {
			if idx == 3 {
				return append(append([]byte{}, p[:bytes.Index(p, []byte("\n\n"))+2]...), cps[1]...)
			}
			return p
		}
	})
	// Events.
	g.scenario("event-other-key", "a log entry signed by another key", "envelope.signature", func(s *scene) {
		s.events = func(evs []evspec) []evspec { evs[3].key = testkeys.AttestationKey(2); return evs }
	})
	g.scenario("event-duplicate-key", "a log entry with a duplicate key, signed", "json.duplicate-key", func(s *scene) {
		s.eventBytes = func(i int, p []byte) []byte {
			if i == 2 {
				return sub(`"barrier":7`, `"barrier":1,"barrier":7`)(p)
			}
			return p
		}
	})
	g.scenario("event-2-53", "a log entry with a barrier of 2^53, signed", "json.number", func(s *scene) {
		s.eventBytes = func(i int, p []byte) []byte {
			if i == 2 {
				return sub(`"barrier":7`, `"barrier":9007199254740992`)(p)
			}
			return p
		}
	})
	g.scenario("event-bom", "a log entry starting with a BOM", "json.bom", func(s *scene) {
		s.entryBytes = func(i int, e []byte) []byte {
			if i == 2 {
				return append([]byte("\xef\xbb\xbf"), e...)
			}
			return e
		}
	})
	g.scenario("event-not-utc", "a log entry with a time at +01:00, signed", "event.format", func(s *scene) {
		s.eventBytes = func(i int, p []byte) []byte {
			if i == 2 {
				return sub(`:30Z"`, `:30+01:00"`)(p)
			}
			return p
		}
	})
	g.scenario("event-two-parts", "a log entry with two parts, signed", "event.format", func(s *scene) {
		s.events = func(evs []evspec) []evspec {
			evs[3].ev.Key = &attest.KeyEvent{Subject: strings.Repeat("0", 64), Generation: 1}
			return evs
		}
	})
	g.scenario("event-kind", "an entry whose file name says key_created but holds a holder_ack", "event.kind", func(s *scene) {
		s.events = func(evs []evspec) []evspec { return evs }
	})
	// event-kind needs the file renamed: done after build below.
	last := &g.cases[len(g.cases)-1]
	{
		s := newScene()
		b := s.build()
		for i := range b.files {
			b.files[i].name = strings.Replace(b.files[i].name, "entry-3-holder_ack", "entry-3-key_created", 1)
		}
		last.Export = b.export(s.dir)
	}
	g.scenario("entries-missing-ack", "the holder ack's entry left out", "entries.mismatch", func(s *scene) {
		s.events = func(evs []evspec) []evspec { evs[3].skip = true; return evs }
	})
	g.scenario("entries-other-attestation", "the erasure_attested entry names another attestation's SHA-256", "entries.mismatch", func(s *scene) {
		s.events = func(evs []evspec) []evspec {
			evs[5].ev.Attested = &attest.AttestedEvent{Forget: s.forget, Subject: evs[5].ev.Attested.Subject, AttestationSHA256: strings.Repeat("ab", 32)}
			return evs
		}
	})
	g.scenario("entries-two-forgets", "two forget_committed entries", "entries.mismatch", func(s *scene) {
		s.events = func(evs []evspec) []evspec {
			evs[6] = evs[2]
			return evs
		}
	})
	g.scenario("entries-epoch-other", "an epoch_completed entry of another epoch", "entries.mismatch", func(s *scene) {
		s.events = func(evs []evspec) []evspec {
			e := *evs[4].ev.Epoch
			e.Epoch = 2
			evs[4].ev.Epoch = &e
			return evs
		}
	})
	// Consistency with a saved checkpoint.
	g.scenario("consistency-skips-saved", "a consistency proof from size 1, not from the saved checkpoint's size 2", "consistency.range", func(s *scene) {
		s.consistency = func(b []byte) []byte {
			n := newScene()
			_ = n
			return bytes.Replace(b, []byte("old 2\n"), []byte("old 1\n"), 1)
		}
	})
	g.scenario("consistency-bad-hash", "a consistency proof with a changed hash", "consistency.fork", func(s *scene) {
		s.consistency = func(b []byte) []byte { return flipHash(b, "new 7\n") }
	})
	g.scenario("consistency-malformed", "a consistency proof without its header", "consistency.format", func(s *scene) {
		s.consistency = func(b []byte) []byte { return bytes.TrimPrefix(b, []byte("shredd/tlog-consistency@v1\n")) }
	})
	g.scenario("consistency-2-53", "a consistency proof to size 2^53", "consistency.format", func(s *scene) {
		s.consistency = func(b []byte) []byte { return bytes.Replace(b, []byte("new 7\n"), []byte("new 9007199254740992\n"), 1) }
	})
	g.scenario("consistency-bom", "a consistency proof starting with a BOM", "text.bom", func(s *scene) {
		s.consistency = func(b []byte) []byte { return append([]byte("\xef\xbb\xbf"), b...) }
	})
	g.archive("consistency-missing", "no consistency.proof though a smaller checkpoint was saved", "consistency.missing", func(b *built, dir string) []byte {
		b.files = b.files[:len(b.files)-1]
		return b.export(dir)
	})
	{
		s := newScene()
		b := s.build()
		in := s.inputs(b)
		// A fork: a log of the same size with another last entry.
		f := newScene()
		f.events = func(evs []evspec) []evspec {
			evs[6].ev.Key = &attest.KeyEvent{Subject: attest.Commit("mallory@example.com", fixed("m")), Generation: 1}
			return evs
		}
		f.savedAt = 7
		in.saved = f.build().saved
		g.add("consistency-fork-same-size", "a saved checkpoint of the same size with another root (a split view)", "consistency.fork", b.export(s.dir), in)
		f2 := newScene()
		f2.events = f.events
		f2.events = func(evs []evspec) []evspec {
			evs[0].ev.Key = &attest.KeyEvent{Subject: attest.Commit("mallory@example.com", fixed("m")), Generation: 1}
			return evs
		}
		in2 := s.inputs(b)
		in2.saved = f2.build().saved
		g.add("consistency-fork-rewritten", "a saved checkpoint of a log whose first entry was rewritten since", "consistency.fork", b.export(s.dir), in2)
		n := newScene()
		n.events = func(evs []evspec) []evspec {
			return append(evs, evspec{ev: attest.Event{Event: attest.EventKeyCreated, Key: &attest.KeyEvent{Subject: attest.Commit("dave@example.com", fixed("d")), Generation: 1}}, skip: true})
		}
		n.savedAt = 8
		in3 := s.inputs(b)
		in3.saved = n.build().saved
		g.add("consistency-saved-newer", "a saved checkpoint newer than the export's", "consistency.newer", b.export(s.dir), in3)
		in4 := s.inputs(b)
		in4.saved = append([]byte("\xef\xbb\xbf"), in4.saved...)
		g.add("saved-bom", "a saved checkpoint starting with a BOM", "text.bom", b.export(s.dir), in4)
		o := newScene()
		o.signer, _ = newLogKey("evidence rogue key", testkeys.LogOrigin)
		in5 := s.inputs(b)
		in5.saved = o.build().saved
		g.add("saved-other-key", "a saved checkpoint signed by another key", "saved.signature", b.export(s.dir), in5)
		oo := newScene()
		oo.cpText = func(t string) string { return strings.Replace(t, testkeys.LogOrigin, "shredd/fedcba9876543210", 1) }
		in6 := s.inputs(b)
		in6.saved = oo.build().saved
		g.add("saved-other-origin", "a saved checkpoint of another origin signed by the log key", "saved.origin", b.export(s.dir), in6)
		in7 := s.inputs(b)
		in7.saved = []byte("not a checkpoint\n")
		g.add("saved-malformed", "a saved checkpoint that is not a signed note", "saved.format", b.export(s.dir), in7)
	}
	_ = time.Second
}

// flipHash flips a bit of the base64 hash on the line after marker.
func flipHash(b []byte, marker string) []byte {
	i := bytes.Index(b, []byte(marker)) + len(marker)
	j := bytes.IndexByte(b[i:], '\n') + i
	h, err := base64.StdEncoding.DecodeString(string(b[i:j]))
	if err != nil {
		panic(err)
	}
	h[0] ^= 1
	return append(append(append([]byte{}, b[:i]...), base64.StdEncoding.EncodeToString(h)...), b[j:]...)
}
