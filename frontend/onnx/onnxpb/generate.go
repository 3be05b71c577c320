// Package onnxpb holds the Go types of ONNX's protobuf schema, generated
// once from onnx.proto of Debian 12's libonnx-dev (ONNX 1.12.0) with
// protoc 3.21.12 (Debian's protobuf-compiler) and protoc-gen-go v1.36.12:
//
//	apt-get install -y libonnx-dev protobuf-compiler
//	go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
//	go generate ./frontend/onnx/onnxpb
//
// The generated onnx.pb.go is committed; regenerate only to follow a newer
// schema.
package onnxpb

//go:generate protoc -I/usr/include/onnx --go_out=. --go_opt=paths=source_relative --go_opt=Monnx.proto=github.com/tapml/tapml/frontend/onnx/onnxpb onnx.proto
