package sidecar

import (
	"context"
	"errors"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	sidecarv1 "github.com/sidecar-dev/sidecar/clients/go/gen/sidecar/v1"
)

// AddressEnv is the environment variable Dial reads when given no address.
const AddressEnv = "SIDECAR_ADDR"

// ErrNoAddress is returned by Dial when neither an address nor $SIDECAR_ADDR is given.
var ErrNoAddress = errors.New("sidecar: no address given and " + AddressEnv + " is not set")

// Client calls a sidecar. It is safe for concurrent use.
type Client struct {
	rpc  sidecarv1.SidecarClient
	conn *grpc.ClientConn // set when Dial made the connection; closed by Close
}

// Dial connects to a sidecar at address: "host:port", or a Unix socket as
// "unix:/path/to.sock" (also "unix:///path", "unix:relative/path"). An empty
// address means $SIDECAR_ADDR. The connection is plaintext unless opts say
// otherwise; it is made lazily, so Dial does not wait for the sidecar.
func Dial(address string, opts ...grpc.DialOption) (*Client, error) {
	if address == "" {
		address = os.Getenv(AddressEnv)
	}
	address = strings.TrimSpace(address)
	if address == "" {
		return nil, ErrNoAddress
	}
	all := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	conn, err := grpc.NewClient(address, all...)
	if err != nil {
		return nil, err
	}
	return &Client{rpc: sidecarv1.NewSidecarClient(conn), conn: conn}, nil
}

// New wraps a connection the caller made (and closes).
func New(conn grpc.ClientConnInterface) *Client {
	return &Client{rpc: sidecarv1.NewSidecarClient(conn)}
}

// Close closes the connection Dial made; it does nothing for a client from New.
func (c *Client) Close() error {
	if c.conn == nil {
		return nil
	}
	return c.conn.Close()
}

// Stub returns the generated stub, for calls this layer does not wrap.
func (c *Client) Stub() sidecarv1.SidecarClient { return c.rpc }

// ExecuteTool runs one tool call. A tool's failure is not an error: it comes
// back as a ToolOutcome whose Failure is set. The error is an *Error only when
// the RPC itself fails (a malformed request: INVALID_ARGUMENT; the sidecar
// unreachable; the context's deadline or cancellation).
func (c *Client) ExecuteTool(ctx context.Context, req *sidecarv1.ExecuteToolRequest, opts ...grpc.CallOption) (*ToolOutcome, error) {
	resp, err := c.rpc.ExecuteTool(ctx, req, opts...)
	if err != nil {
		return nil, FromError(err)
	}
	return newToolOutcome(req, resp), nil
}

// RunToolCall runs a tool call the model made, under job (which may be nil).
func (c *Client) RunToolCall(ctx context.Context, call *sidecarv1.ToolCall, job *sidecarv1.Job, opts ...grpc.CallOption) (*ToolOutcome, error) {
	req := &sidecarv1.ExecuteToolRequest{
		Tool:          call.GetName(),
		ArgumentsJson: call.GetArgumentsJson(),
		CallId:        call.GetId(),
		Job:           job,
	}
	outcome, err := c.ExecuteTool(ctx, req, opts...)
	if outcome != nil {
		outcome.toolName = call.GetName()
	}
	return outcome, err
}

// CallModel sends a conversation to a catalog model. When no reply can be
// produced the error is an *Error carrying the sidecar's Failure.
func (c *Client) CallModel(ctx context.Context, req *sidecarv1.CallModelRequest, opts ...grpc.CallOption) (*sidecarv1.CallModelResponse, error) {
	resp, err := c.rpc.CallModel(ctx, req, opts...)
	if err != nil {
		return nil, FromError(err)
	}
	return resp, nil
}

// ClassifyFailure maps what an agent's own tool saw onto the Failure the
// sidecar would have produced (kind FAILURE_KIND_UNSPECIFIED for a success or a
// granted pre-check). Use FromFailure to handle the answer as an *Error.
func (c *Client) ClassifyFailure(ctx context.Context, req *sidecarv1.ClassifyFailureRequest, opts ...grpc.CallOption) (*sidecarv1.Failure, error) {
	resp, err := c.rpc.ClassifyFailure(ctx, req, opts...)
	if err != nil {
		return nil, FromError(err)
	}
	return resp, nil
}

// ListTools lists the configured tools, with schemas ready for a model.
func (c *Client) ListTools(ctx context.Context, opts ...grpc.CallOption) ([]*sidecarv1.ToolInfo, error) {
	resp, err := c.rpc.ListTools(ctx, &sidecarv1.ListToolsRequest{}, opts...)
	if err != nil {
		return nil, FromError(err)
	}
	return resp.GetTools(), nil
}

// ListModels lists the model catalog.
func (c *Client) ListModels(ctx context.Context, opts ...grpc.CallOption) ([]*sidecarv1.ModelInfo, error) {
	resp, err := c.rpc.ListModels(ctx, &sidecarv1.ListModelsRequest{}, opts...)
	if err != nil {
		return nil, FromError(err)
	}
	return resp.GetModels(), nil
}

// ToolDefinitions returns the definitions of tools, ready for a CallModelRequest.
func ToolDefinitions(tools []*sidecarv1.ToolInfo) []*sidecarv1.ToolDefinition {
	defs := make([]*sidecarv1.ToolDefinition, 0, len(tools))
	for _, t := range tools {
		defs = append(defs, t.GetDefinition())
	}
	return defs
}
