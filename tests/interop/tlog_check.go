// tlog_check verifies what ulticode's C++ tlog library wrote (the file named
// by its argument) with an independent implementation of the same standards:
// golang.org/x/mod/sumdb/tlog (RFC 9162 hashing, inclusion and consistency
// proofs) and golang.org/x/mod/sumdb/note (C2SP signed notes). Debian's
// golang-golang-x-mod-dev, built with GO111MODULE=off and
// GOPATH=/usr/share/gocode: nothing is downloaded.
//
// Input lines:
//
//	leaf <hex bytes>                    the leaves, in order
//	root <size> <hex root>
//	inclusion <index> <size> <hex hash>,...   ("-" for none)
//	consistency <old size> <size> <hex hash>,...
//	vkey <verifier key>
//	note <base64 of a signed checkpoint>
//
// Every claim is checked; each proof is also altered once and must then fail
// (so a check that cannot fail is caught). Exit status 0 only when all hold.
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

var failures int

func fail(format string, args ...interface{}) {
	failures++
	fmt.Printf("FAIL "+format+"\n", args...)
}

func hashes(s string) []tlog.Hash {
	if s == "-" {
		return nil
	}
	var out []tlog.Hash
	for _, h := range strings.Split(s, ",") {
		b, err := hex.DecodeString(h)
		if err != nil || len(b) != 32 {
			fail("bad hash %q", h)
			return nil
		}
		var x tlog.Hash
		copy(x[:], b)
		out = append(out, x)
	}
	return out
}

func main() {
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	var stored []tlog.Hash
	reader := tlog.HashReaderFunc(func(indexes []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(indexes))
		for i, x := range indexes {
			out[i] = stored[x]
		}
		return out, nil
	})
	var leaves []tlog.Hash
	var vkeys []note.Verifier
	checks := 0
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<20), 1<<26)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		switch fields[0] {
		case "leaf":
			data, _ := hex.DecodeString(strings.TrimPrefix(fields[1], "x"))
			h := tlog.RecordHash(data)
			more, err := tlog.StoredHashesForRecordHash(int64(len(leaves)), h, reader)
			if err != nil {
				fail("stored hashes: %v", err)
			}
			stored = append(stored, more...)
			leaves = append(leaves, h)
		case "root":
			n, _ := strconv.ParseInt(fields[1], 10, 64)
			want, err := tlog.TreeHash(n, reader)
			if err != nil || want.String() != base64.StdEncoding.EncodeToString(hashes(fields[2])[0][:]) {
				fail("root of %d: ours %s, Go's %s", n, fields[2], want)
			}
			checks++
		case "inclusion":
			i, _ := strconv.ParseInt(fields[1], 10, 64)
			n, _ := strconv.ParseInt(fields[2], 10, 64)
			proof := tlog.RecordProof(hashes(fields[3]))
			root, _ := tlog.TreeHash(n, reader)
			if err := tlog.CheckRecord(proof, n, root, i, leaves[i]); err != nil {
				fail("inclusion of %d in %d: %v", i, n, err)
			}
			if len(proof) > 0 {
				proof[0][0] ^= 1
				if tlog.CheckRecord(proof, n, root, i, leaves[i]) == nil {
					fail("an altered inclusion proof of %d in %d passed", i, n)
				}
			}
			checks++
		case "consistency":
			m, _ := strconv.ParseInt(fields[1], 10, 64)
			n, _ := strconv.ParseInt(fields[2], 10, 64)
			proof := tlog.TreeProof(hashes(fields[3]))
			old, _ := tlog.TreeHash(m, reader)
			root, _ := tlog.TreeHash(n, reader)
			if err := tlog.CheckTree(proof, n, root, m, old); err != nil {
				fail("consistency %d -> %d: %v", m, n, err)
			}
			if len(proof) > 0 {
				proof[len(proof)-1][31] ^= 0x80
				if tlog.CheckTree(proof, n, root, m, old) == nil {
					fail("an altered consistency proof %d -> %d passed", m, n)
				}
			}
			checks++
		case "vkey":
			v, err := note.NewVerifier(fields[1])
			if err != nil {
				fail("verifier key %q: %v", fields[1], err)
				continue
			}
			vkeys = append(vkeys, v)
			checks++
		case "note":
			msg, _ := base64.StdEncoding.DecodeString(fields[1])
			n, err := note.Open(msg, note.VerifierList(vkeys...))
			if err != nil {
				fail("note does not open: %v", err)
				continue
			}
			lines := strings.Split(n.Text, "\n")
			size, _ := strconv.ParseInt(lines[1], 10, 64)
			root, _ := tlog.TreeHash(size, reader)
			if lines[2] != root.String() {
				fail("checkpoint root %s, Go's %s", lines[2], root)
			}
			altered := append([]byte{}, msg...)
			altered[0] ^= 1
			if _, err := note.Open(altered, note.VerifierList(vkeys...)); err == nil {
				fail("an altered note opened")
			}
			checks++
		default:
			fail("unknown line %q", fields[0])
		}
	}
	if failures > 0 {
		os.Exit(1)
	}
	fmt.Printf("ok %d checks\n", checks)
}
