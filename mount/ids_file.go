package mount

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math/bits"
	"os"
	"path/filepath"

	"github.com/deltafs/deltafs/fs"
	"github.com/deltafs/deltafs/index"
	"github.com/deltafs/deltafs/objstore"
)

// idsFile maps live-tree FileIDs to store FileIDs: a log of records
// appended when a file gets its store identity, read whole at mount. A
// record is durable before the revision that needs it is put (syncIDs):
// a lost record would make its live file look new and its store file
// look like a deleted file's, whose unsnapshotted history gc removes. A
// batch's new files share one fsync.
//
// Format 2: the 8-byte header idsHeader, then 28-byte records: the
// 16-byte fs.FileID, the 8-byte big-endian index.FileID and a CRC-32C of
// those 24 bytes. Later records win; a store FileID of 0 takes the live
// file's mapping away (its history went to the file renamed over it). A record that fails its checksum is an error (a map
// that answered with a damaged record would give a live file another
// file's history, and gc would take its own for a deleted file's),
// unless no good record follows it: the torn tail of an append cut
// short by a power cut, whose revision was never put. A writable open
// cuts such a tail off.
//
// Format 1, written before format 2, has no header and 24-byte records
// without a checksum: readers take it as it is, and a writable open
// rewrites it as format 2 first.
const idsFile = "live.ids"

var idsHeader = []byte("dfsids\x00\x02")

const (
	idRecordLen   = 28
	idRecordLenV1 = 24
	// maxV1FileID bounds the store FileIDs of a plausible format 1
	// record: store files are numbered from 1, one per file ever made.
	maxV1FileID = 1 << 40
)

var idsCRC = crc32.MakeTable(crc32.Castagnoli)

// errIDs marks a damaged ids file.
var errIDs = errors.New("damaged " + idsFile)

// appendIDRecord appends the format 2 record mapping id to fid.
func appendIDRecord(dst []byte, id fs.FileID, fid index.FileID) []byte {
	start := len(dst)
	dst = append(dst, id[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(fid))
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], idsCRC))
}

// idsScan is what parseIDs found.
type idsScan struct {
	v1   bool // format 1
	good int  // bytes from the start up to the end of the last good record (or the header)
}

// parseIDs adds the records of the ids file's bytes b to ids (later
// records win). A record that fails its checksum before a good one is an
// error wrapping errIDs; bad bytes after the last good record (a torn
// tail) are left out, and scan.good says where they start.
func parseIDs(b []byte, ids map[fs.FileID]index.FileID) (scan idsScan, err error) {
	if !bytes.HasPrefix(b, idsHeader) {
		if len(b) < len(idsHeader) && bytes.HasPrefix(idsHeader, b) {
			return idsScan{}, nil // a header cut short: an empty file
		}
		if len(b) >= len(idsHeader) && bitsApart(b[:len(idsHeader)], idsHeader) <= 8 {
			// A format 1 file starts with a random FileID: 8 bits or
			// fewer from the header by chance once in ~2^31 stores. This
			// is a damaged header, or a newer version: read as format 1,
			// and rewritten, it would lose every mapping.
			return scan, fmt.Errorf("%w: header %q is not %q", errIDs, b[:len(idsHeader)], idsHeader)
		}
		scan.v1 = true
		for ; scan.good+idRecordLenV1 <= len(b); scan.good += idRecordLenV1 {
			r := b[scan.good:]
			fid := index.FileID(binary.BigEndian.Uint64(r[16:]))
			if fid >= maxV1FileID {
				// Store files are numbered from 1 up: this is no ids
				// file (garbage in its place), and rewritten as format
				// 2 it would lose every mapping.
				return scan, fmt.Errorf("%w: no header, and the record at byte %d names store file %d", errIDs, scan.good, fid)
			}
			setID(ids, fs.FileID(r[:16]), fid)
		}
		return scan, nil
	}
	scan.good = len(idsHeader)
	firstBad := -1
	for off := scan.good; off+idRecordLen <= len(b); off += idRecordLen {
		r := b[off : off+idRecordLen]
		if crc32.Checksum(r[:24], idsCRC) != binary.BigEndian.Uint32(r[24:]) {
			if firstBad < 0 {
				firstBad = off
			}
			continue
		}
		if firstBad >= 0 {
			return scan, fmt.Errorf("%w: the record at byte %d fails its checksum", errIDs, firstBad)
		}
		setID(ids, fs.FileID(r[:16]), index.FileID(binary.BigEndian.Uint64(r[16:])))
		scan.good = off + idRecordLen
	}
	return scan, nil
}

// bitsApart counts the bits in which a and b (of one length) differ.
func bitsApart(a, b []byte) int {
	n := 0
	for i := range a {
		n += bits.OnesCount8(a[i] ^ b[i])
	}
	return n
}

// setID applies one record to ids.
func setID(ids map[fs.FileID]index.FileID, id fs.FileID, fid index.FileID) {
	if fid == 0 {
		delete(ids, id)
		return
	}
	ids[id] = fid
}

// readIDs reads the live.ids map of the store in dir; a store that never
// recorded anything has none.
func readIDs(dir string) (map[fs.FileID]index.FileID, error) {
	ids := map[fs.FileID]index.FileID{}
	p := filepath.Join(dir, idsFile)
	b, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if _, err := parseIDs(b, ids); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return ids, nil
}

// checkIDsKept fails if the store in dir lost its live.ids: the file
// maps no live file (missing, or emptied) while a live file a mount
// recorded is there (lostMapping); or if its live files lost their
// FileIDs (idsKeptByCopy). The mount would otherwise record every live
// file as a new one, and gc take their histories for deleted files'.
//
// A live.ids holding a record's bytes past its header is left to the
// parse that opens it (openIDs): read here too, a big map was read twice
// at every mount.
func checkIDsKept(dir string) error {
	if st, err := os.Stat(filepath.Join(dir, idsFile)); err == nil && st.Size() >= int64(len(idsHeader)+idRecordLen) {
		return idsKeptByCopy(dir, true)
	}
	ids, err := readIDs(dir)
	if err != nil || len(ids) > 0 {
		return errors.Join(err, idsKeptByCopy(dir, len(ids) > 0))
	}
	lost, err := lostMapping(dir, ids)
	if err != nil || lost == "" {
		return err
	}
	return unmappedError(dir, lost, 1)
}

// openIDs reads the ids file at path into ids and opens it for
// appending format 2 records: a new file gets its header, a format 1
// file is rewritten as format 2 and a torn tail is cut off, each made
// durable (file and directory) before it returns. st's format is raised
// to objstore.FormatMountIDs first, so that an older build, which would
// misread format 2, refuses the store.
func openIDs(st *objstore.Store, path string, ids map[fs.FileID]index.FileID, log *slog.Logger) (*os.File, error) {
	if err := st.RequireFormat(objstore.FormatMountIDs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	scan, err := parseIDs(b, ids)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case scan.v1 || scan.good < len(idsHeader):
		// New, format 1, or a header cut short: write it whole, then
		// put it in place.
		out := append([]byte(nil), idsHeader...)
		for id, fid := range ids {
			out = appendIDRecord(out, id, fid)
		}
		if err := objstore.WriteFileSync(path, out, 0o600); err != nil {
			return nil, err
		}
		if scan.v1 && len(b) > 0 {
			log.Info("ids file rewritten in format 2 (checksummed records)", "file", path, "records", len(ids))
		}
	case scan.good < len(b):
		log.Warn("ids file ends in a torn record; cut off", "file", path, "bytes", len(b)-scan.good)
		if err := os.Truncate(path, int64(scan.good)); err != nil {
			return nil, fmt.Errorf("cut the torn tail of %s: %w", path, err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if scan.good < len(b) && !scan.v1 {
		if err := f.Sync(); err != nil { // the cut, before anything is appended
			f.Close()
			return nil, fmt.Errorf("fsync %s: %w", path, err)
		}
	}
	return f, nil
}
