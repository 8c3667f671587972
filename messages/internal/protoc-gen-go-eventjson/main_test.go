package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/fathom-agents/fathom/messages"
)

var update = flag.Bool("update", false, "rewrite the committed generated file")

// TestGeneratedFileIsCurrent runs the plugin on events.proto as protoc would (its
// descriptor, compiled into the messages package) and compares the result with the
// committed messages/events_eventjson.pb.go, so a changed events.proto whose marshallers
// were not regenerated fails here even where protoc is not installed. -update rewrites
// the committed file.
func TestGeneratedFileIsCurrent(t *testing.T) {
	fd := protodesc.ToFileDescriptorProto(messages.File_events_proto)
	req := &pluginpb.CodeGeneratorRequest{
		FileToGenerate: []string{fd.GetName()},
		Parameter:      proto.String("module=github.com/fathom-agents/fathom"),
		ProtoFile:      []*descriptorpb.FileDescriptorProto{fd},
	}
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := generate(gen); err != nil {
		t.Fatal(err)
	}
	resp := gen.Response()
	if resp.Error != nil {
		t.Fatal(resp.GetError())
	}
	if len(resp.File) != 1 {
		t.Fatalf("generated %d files, want 1", len(resp.File))
	}
	name := resp.File[0].GetName()
	if name != "messages/events_eventjson.pb.go" {
		t.Fatalf("generated %s, want messages/events_eventjson.pb.go", name)
	}
	got := []byte(resp.File[0].GetContent())
	path := filepath.Join("..", "..", "..", filepath.FromSlash(name))
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run `make proto` (or go test ./messages/internal/protoc-gen-go-eventjson -update)", path)
	}
	if n := strings.Count(string(got), ") appendDialectJSON("); n < 48 {
		t.Fatalf("%d marshallers generated, want one per message of events.proto but Event", n)
	}
}

// TestUnsupportedFieldsAreAnError: a field kind the generated code does not render is a
// generation error naming it, not a file that renders it wrongly.
func TestUnsupportedFieldsAreAnError(t *testing.T) {
	for kind, typ := range map[string]descriptorpb.FieldDescriptorProto_Type{
		"bytes": descriptorpb.FieldDescriptorProto_TYPE_BYTES,
		"enum":  descriptorpb.FieldDescriptorProto_TYPE_ENUM,
	} {
		t.Run(kind, func(t *testing.T) {
			field := &descriptorpb.FieldDescriptorProto{Name: proto.String("f"), Number: proto.Int32(1),
				Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(), Type: typ.Enum(), JsonName: proto.String("f")}
			file := &descriptorpb.FileDescriptorProto{Name: proto.String("x.proto"), Package: proto.String("x"), Syntax: proto.String("proto3"),
				Options:     &descriptorpb.FileOptions{GoPackage: proto.String("example.com/x;x")},
				MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("M"), Field: []*descriptorpb.FieldDescriptorProto{field}}}}
			if typ == descriptorpb.FieldDescriptorProto_TYPE_ENUM {
				field.TypeName = proto.String(".x.E")
				file.EnumType = []*descriptorpb.EnumDescriptorProto{{Name: proto.String("E"),
					Value: []*descriptorpb.EnumValueDescriptorProto{{Name: proto.String("E_ZERO"), Number: proto.Int32(0)}}}}
			}
			gen, err := protogen.Options{}.New(&pluginpb.CodeGeneratorRequest{FileToGenerate: []string{"x.proto"},
				ProtoFile: []*descriptorpb.FileDescriptorProto{file}})
			if err != nil {
				t.Fatal(err)
			}
			err = generate(gen)
			if err == nil || !strings.Contains(err.Error(), "x.M") || !strings.Contains(err.Error(), "not supported") {
				t.Fatalf("generate = %v, want an error naming x.M's unsupported field", err)
			}
		})
	}
}
