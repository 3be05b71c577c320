package vulkan

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var cacheDev = physInfo{Vendor: 0x10de, DeviceID: 0x2335, Driver: 0x91000000, CacheUUID: [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}}

// cacheBlob is a pipeline cache of p: its header and some body.
func cacheBlob(p *physInfo, body string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 32)
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = binary.LittleEndian.AppendUint32(b, p.Vendor)
	b = binary.LittleEndian.AppendUint32(b, p.DeviceID)
	b = append(b, p.CacheUUID[:]...)
	return append(b, body...)
}

func TestCheckCacheHeader(t *testing.T) {
	other := cacheDev
	other.CacheUUID[0] = 99
	good := cacheBlob(&cacheDev, "kernels")
	set := func(off int, v uint32) []byte {
		b := append([]byte(nil), good...)
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"ours", good, ""},
		{"short", good[:31], "no header"},
		{"header longer than the file", set(0, 4096), "header of 4096 bytes"},
		{"header too short", set(0, 16), "header of 16 bytes"},
		{"version", set(4, 2), "version 2"},
		{"vendor", set(8, 0x1002), "device 1002:2335"},
		{"driver build", cacheBlob(&other, ""), "UUID"},
	} {
		err := checkCacheHeader(c.data, &cacheDev)
		if (err == nil) != (c.want == "") || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

// TestPipelineCacheFile saves and loads the cache file: a round trip, a
// file of another driver build ignored, a folder in the file's place
// ignored, and no file written when there is no folder to write to.
func TestPipelineCacheFile(t *testing.T) {
	dir := t.TempDir()
	blob := cacheBlob(&cacheDev, "compiled kernels")
	if err := savePipelineCache(dir, &cacheDev, blob); err != nil {
		t.Fatal(err)
	}
	if got := loadPipelineCache(dir, &cacheDev); string(got) != string(blob) {
		t.Errorf("loaded %q, want %q", got, blob)
	}
	other := cacheDev
	other.CacheUUID[3] = 0 // another driver build; a file in its place holding our cache
	if err := os.WriteFile(pipelineCacheFile(dir, &other), cacheBlob(&cacheDev, "x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := loadPipelineCache(dir, &other); got != nil {
		t.Errorf("loaded %d bytes of another driver build's cache", len(got))
	}
	folder := cacheDev
	folder.DeviceID = 1
	if err := os.Mkdir(pipelineCacheFile(dir, &folder), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := loadPipelineCache(dir, &folder); got != nil {
		t.Errorf("loaded %d bytes from a folder", len(got))
	}
	if loadPipelineCache("", &cacheDev) != nil || savePipelineCache("", &cacheDev, blob) != nil {
		t.Error("an empty folder name should mean no cache")
	}
	left, err := filepath.Glob(filepath.Join(dir, ".pipeline-*"))
	if err != nil || len(left) != 0 {
		t.Errorf("temporary files left: %v %v", left, err)
	}
}

// TestDevicePipelineCache checks that a device writes its driver's cache
// on Close and a device opened later reads it back (lavapipe's cache is
// the bare header).
func TestDevicePipelineCache(t *testing.T) {
	dir := t.TempDir()
	d := openTest(t, Options{PipelineCacheDir: dir})
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(pipelineCacheFile(dir, &d.phys))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkCacheHeader(data, &d.phys); err != nil {
		t.Errorf("the saved cache: %v", err)
	}
	if loadPipelineCache(dir, &d.phys) == nil {
		t.Error("the saved cache is not read back")
	}
}

// FuzzCacheHeader: checkCacheHeader never panics, and accepts only data
// that starts with the device's own header.
func FuzzCacheHeader(f *testing.F) {
	f.Add(cacheBlob(&cacheDev, ""))
	f.Add(cacheBlob(&cacheDev, "body"))
	f.Add([]byte("short"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if checkCacheHeader(data, &cacheDev) != nil {
			return
		}
		if string(data[16:32]) != string(cacheDev.CacheUUID[:]) || binary.LittleEndian.Uint32(data[8:]) != cacheDev.Vendor {
			t.Fatalf("accepted a header of another device: %x", data[:32])
		}
	})
}
