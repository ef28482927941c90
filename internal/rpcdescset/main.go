// Command rpcdescset writes, to stdout, a FileDescriptorSet of
// google/rpc/status.proto and google/rpc/error_details.proto (and the
// well-known types they import), taken from the genproto Go module the
// server is built with. `make generate` feeds it to protoc to generate the
// Python SDK's copies of those messages: Debian packages no
// googleapis-common-protos for Python, and the SDK must decode ErrorInfo,
// BadRequest and RetryInfo from a status's details.
package main

import (
	"os"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

func main() {
	set := &descriptorpb.FileDescriptorSet{}
	for _, f := range []protoreflect.FileDescriptor{
		anypb.File_google_protobuf_any_proto,
		durationpb.File_google_protobuf_duration_proto,
		status.File_google_rpc_status_proto,
		errdetails.File_google_rpc_error_details_proto,
	} {
		set.File = append(set.File, protodesc.ToFileDescriptorProto(f))
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
	if err != nil {
		panic(err)
	}
	if _, err := os.Stdout.Write(b); err != nil {
		panic(err)
	}
}
