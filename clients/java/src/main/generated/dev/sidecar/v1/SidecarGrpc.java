package dev.sidecar.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Sidecar runs model calls and tool calls under one failure policy.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class SidecarGrpc {

  private SidecarGrpc() {}

  public static final java.lang.String SERVICE_NAME = "sidecar.v1.Sidecar";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.sidecar.v1.ExecuteToolRequest,
      dev.sidecar.v1.ExecuteToolResponse> getExecuteToolMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ExecuteTool",
      requestType = dev.sidecar.v1.ExecuteToolRequest.class,
      responseType = dev.sidecar.v1.ExecuteToolResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.sidecar.v1.ExecuteToolRequest,
      dev.sidecar.v1.ExecuteToolResponse> getExecuteToolMethod() {
    io.grpc.MethodDescriptor<dev.sidecar.v1.ExecuteToolRequest, dev.sidecar.v1.ExecuteToolResponse> getExecuteToolMethod;
    if ((getExecuteToolMethod = SidecarGrpc.getExecuteToolMethod) == null) {
      synchronized (SidecarGrpc.class) {
        if ((getExecuteToolMethod = SidecarGrpc.getExecuteToolMethod) == null) {
          SidecarGrpc.getExecuteToolMethod = getExecuteToolMethod =
              io.grpc.MethodDescriptor.<dev.sidecar.v1.ExecuteToolRequest, dev.sidecar.v1.ExecuteToolResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ExecuteTool"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.ExecuteToolRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.ExecuteToolResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SidecarMethodDescriptorSupplier("ExecuteTool"))
              .build();
        }
      }
    }
    return getExecuteToolMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.sidecar.v1.CallModelRequest,
      dev.sidecar.v1.CallModelResponse> getCallModelMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CallModel",
      requestType = dev.sidecar.v1.CallModelRequest.class,
      responseType = dev.sidecar.v1.CallModelResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.sidecar.v1.CallModelRequest,
      dev.sidecar.v1.CallModelResponse> getCallModelMethod() {
    io.grpc.MethodDescriptor<dev.sidecar.v1.CallModelRequest, dev.sidecar.v1.CallModelResponse> getCallModelMethod;
    if ((getCallModelMethod = SidecarGrpc.getCallModelMethod) == null) {
      synchronized (SidecarGrpc.class) {
        if ((getCallModelMethod = SidecarGrpc.getCallModelMethod) == null) {
          SidecarGrpc.getCallModelMethod = getCallModelMethod =
              io.grpc.MethodDescriptor.<dev.sidecar.v1.CallModelRequest, dev.sidecar.v1.CallModelResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CallModel"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.CallModelRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.CallModelResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SidecarMethodDescriptorSupplier("CallModel"))
              .build();
        }
      }
    }
    return getCallModelMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.sidecar.v1.ClassifyFailureRequest,
      dev.sidecar.v1.Failure> getClassifyFailureMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ClassifyFailure",
      requestType = dev.sidecar.v1.ClassifyFailureRequest.class,
      responseType = dev.sidecar.v1.Failure.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.sidecar.v1.ClassifyFailureRequest,
      dev.sidecar.v1.Failure> getClassifyFailureMethod() {
    io.grpc.MethodDescriptor<dev.sidecar.v1.ClassifyFailureRequest, dev.sidecar.v1.Failure> getClassifyFailureMethod;
    if ((getClassifyFailureMethod = SidecarGrpc.getClassifyFailureMethod) == null) {
      synchronized (SidecarGrpc.class) {
        if ((getClassifyFailureMethod = SidecarGrpc.getClassifyFailureMethod) == null) {
          SidecarGrpc.getClassifyFailureMethod = getClassifyFailureMethod =
              io.grpc.MethodDescriptor.<dev.sidecar.v1.ClassifyFailureRequest, dev.sidecar.v1.Failure>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ClassifyFailure"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.ClassifyFailureRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.Failure.getDefaultInstance()))
              .setSchemaDescriptor(new SidecarMethodDescriptorSupplier("ClassifyFailure"))
              .build();
        }
      }
    }
    return getClassifyFailureMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.sidecar.v1.ListToolsRequest,
      dev.sidecar.v1.ListToolsResponse> getListToolsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListTools",
      requestType = dev.sidecar.v1.ListToolsRequest.class,
      responseType = dev.sidecar.v1.ListToolsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.sidecar.v1.ListToolsRequest,
      dev.sidecar.v1.ListToolsResponse> getListToolsMethod() {
    io.grpc.MethodDescriptor<dev.sidecar.v1.ListToolsRequest, dev.sidecar.v1.ListToolsResponse> getListToolsMethod;
    if ((getListToolsMethod = SidecarGrpc.getListToolsMethod) == null) {
      synchronized (SidecarGrpc.class) {
        if ((getListToolsMethod = SidecarGrpc.getListToolsMethod) == null) {
          SidecarGrpc.getListToolsMethod = getListToolsMethod =
              io.grpc.MethodDescriptor.<dev.sidecar.v1.ListToolsRequest, dev.sidecar.v1.ListToolsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListTools"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.ListToolsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.ListToolsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SidecarMethodDescriptorSupplier("ListTools"))
              .build();
        }
      }
    }
    return getListToolsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.sidecar.v1.ListModelsRequest,
      dev.sidecar.v1.ListModelsResponse> getListModelsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListModels",
      requestType = dev.sidecar.v1.ListModelsRequest.class,
      responseType = dev.sidecar.v1.ListModelsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.sidecar.v1.ListModelsRequest,
      dev.sidecar.v1.ListModelsResponse> getListModelsMethod() {
    io.grpc.MethodDescriptor<dev.sidecar.v1.ListModelsRequest, dev.sidecar.v1.ListModelsResponse> getListModelsMethod;
    if ((getListModelsMethod = SidecarGrpc.getListModelsMethod) == null) {
      synchronized (SidecarGrpc.class) {
        if ((getListModelsMethod = SidecarGrpc.getListModelsMethod) == null) {
          SidecarGrpc.getListModelsMethod = getListModelsMethod =
              io.grpc.MethodDescriptor.<dev.sidecar.v1.ListModelsRequest, dev.sidecar.v1.ListModelsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListModels"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.ListModelsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.ListModelsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SidecarMethodDescriptorSupplier("ListModels"))
              .build();
        }
      }
    }
    return getListModelsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.sidecar.v1.CallModelRequest,
      dev.sidecar.v1.StreamModelEvent> getStreamModelMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "StreamModel",
      requestType = dev.sidecar.v1.CallModelRequest.class,
      responseType = dev.sidecar.v1.StreamModelEvent.class,
      methodType = io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
  public static io.grpc.MethodDescriptor<dev.sidecar.v1.CallModelRequest,
      dev.sidecar.v1.StreamModelEvent> getStreamModelMethod() {
    io.grpc.MethodDescriptor<dev.sidecar.v1.CallModelRequest, dev.sidecar.v1.StreamModelEvent> getStreamModelMethod;
    if ((getStreamModelMethod = SidecarGrpc.getStreamModelMethod) == null) {
      synchronized (SidecarGrpc.class) {
        if ((getStreamModelMethod = SidecarGrpc.getStreamModelMethod) == null) {
          SidecarGrpc.getStreamModelMethod = getStreamModelMethod =
              io.grpc.MethodDescriptor.<dev.sidecar.v1.CallModelRequest, dev.sidecar.v1.StreamModelEvent>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.SERVER_STREAMING)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "StreamModel"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.CallModelRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.StreamModelEvent.getDefaultInstance()))
              .setSchemaDescriptor(new SidecarMethodDescriptorSupplier("StreamModel"))
              .build();
        }
      }
    }
    return getStreamModelMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static SidecarStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SidecarStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SidecarStub>() {
        @java.lang.Override
        public SidecarStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SidecarStub(channel, callOptions);
        }
      };
    return SidecarStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static SidecarBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SidecarBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SidecarBlockingV2Stub>() {
        @java.lang.Override
        public SidecarBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SidecarBlockingV2Stub(channel, callOptions);
        }
      };
    return SidecarBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static SidecarBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SidecarBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SidecarBlockingStub>() {
        @java.lang.Override
        public SidecarBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SidecarBlockingStub(channel, callOptions);
        }
      };
    return SidecarBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static SidecarFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SidecarFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SidecarFutureStub>() {
        @java.lang.Override
        public SidecarFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SidecarFutureStub(channel, callOptions);
        }
      };
    return SidecarFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Sidecar runs model calls and tool calls under one failure policy.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * ExecuteTool runs a configured tool. A tool's failure is a result (OK, with
     * `failure` set), never an RPC error: an unknown tool or arguments that are not
     * a JSON object are INVALID_INPUT results too. Only gRPC's own limits (message
     * size, deadline, cancellation) end the RPC with a status.
     * </pre>
     */
    default void executeTool(dev.sidecar.v1.ExecuteToolRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.ExecuteToolResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getExecuteToolMethod(), responseObserver);
    }

    /**
     * <pre>
     * CallModel sends a conversation to a catalog model. Rate limits, overloads
     * and transient faults are retried beneath the caller; unusable replies are
     * corrected; what cannot succeed fails the RPC with a typed Failure.
     * </pre>
     */
    default void callModel(dev.sidecar.v1.CallModelRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.CallModelResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCallModelMethod(), responseObserver);
    }

    /**
     * <pre>
     * ClassifyFailure maps what an agent's own tool saw onto the very Failure
     * the sidecar would have produced. When `service` is named, the report also
     * feeds that service's throttle and circuit. Three uses:
     *   * `response` or `fault` set: classify (and record) a failed call;
     *   * `response` with a 2xx status: record a success, returns kind UNSPECIFIED;
     *   * neither set (a pre-check): returns CIRCUIT_OPEN when the circuit would
     *     refuse the call, else kind UNSPECIFIED. When the circuit is half-open and
     *     this caller is granted its one probe, the answer is kind UNSPECIFIED with
     *     `circuit.state` CIRCUIT_STATE_HALF_OPEN: make the call, then report its
     *     outcome with `probe` set (no report within the probe timeout counts as a
     *     lost probe, and the circuit reopens).
     * Trust (docs/trust.md): any caller that reaches the sidecar may report. For a
     * service the sidecar calls itself (in `services:`, or a tool's service) a
     * report feeds its throttle and circuit, and a pre-check may take its probe,
     * only when `services.NAME.accept_reports` is true. Otherwise the report is
     * classified and answered with the same Failure but charges nothing, and a
     * pre-check only looks (CIRCUIT_OPEN or kind UNSPECIFIED, never the probe);
     * the server span's `sidecar.report.accepted` says which. A service named only
     * in reports gets a small guard of its own (at most 1000 are kept: the least
     * recently used without an open circuit or a probe out makes room). A
     * `service`, `parameter` or `resource_type` longer than 128 characters, or an
     * `endpoint` longer than 2048, is INVALID_INPUT naming the field.
     * </pre>
     */
    default void classifyFailure(dev.sidecar.v1.ClassifyFailureRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.Failure> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getClassifyFailureMethod(), responseObserver);
    }

    /**
     * <pre>
     * ListTools lists the configured tools, with schemas ready for a model.
     * </pre>
     */
    default void listTools(dev.sidecar.v1.ListToolsRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.ListToolsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListToolsMethod(), responseObserver);
    }

    /**
     * <pre>
     * ListModels lists the model catalog, routes with their deployments.
     * </pre>
     */
    default void listModels(dev.sidecar.v1.ListModelsRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.ListModelsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListModelsMethod(), responseObserver);
    }

    /**
     * <pre>
     * StreamModel is CallModel, streamed: the same request, the same policy
     * before the first delta, and the reply as events. Deltas come as the model
     * writes them; a `restart` event says that what came before it is void (a
     * mid-stream fault retried, a truncated reply re-run, a correction); the
     * last event is `final`, with the whole reply as CallModel returns it. A
     * failure ends the stream with the same status and details as CallModel.
     * buf:lint:ignore RPC_REQUEST_STANDARD_NAME
     * </pre>
     */
    default void streamModel(dev.sidecar.v1.CallModelRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.StreamModelEvent> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getStreamModelMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service Sidecar.
   * <pre>
   * Sidecar runs model calls and tool calls under one failure policy.
   * </pre>
   */
  public static abstract class SidecarImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return SidecarGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service Sidecar.
   * <pre>
   * Sidecar runs model calls and tool calls under one failure policy.
   * </pre>
   */
  public static final class SidecarStub
      extends io.grpc.stub.AbstractAsyncStub<SidecarStub> {
    private SidecarStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SidecarStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SidecarStub(channel, callOptions);
    }

    /**
     * <pre>
     * ExecuteTool runs a configured tool. A tool's failure is a result (OK, with
     * `failure` set), never an RPC error: an unknown tool or arguments that are not
     * a JSON object are INVALID_INPUT results too. Only gRPC's own limits (message
     * size, deadline, cancellation) end the RPC with a status.
     * </pre>
     */
    public void executeTool(dev.sidecar.v1.ExecuteToolRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.ExecuteToolResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getExecuteToolMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * CallModel sends a conversation to a catalog model. Rate limits, overloads
     * and transient faults are retried beneath the caller; unusable replies are
     * corrected; what cannot succeed fails the RPC with a typed Failure.
     * </pre>
     */
    public void callModel(dev.sidecar.v1.CallModelRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.CallModelResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCallModelMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * ClassifyFailure maps what an agent's own tool saw onto the very Failure
     * the sidecar would have produced. When `service` is named, the report also
     * feeds that service's throttle and circuit. Three uses:
     *   * `response` or `fault` set: classify (and record) a failed call;
     *   * `response` with a 2xx status: record a success, returns kind UNSPECIFIED;
     *   * neither set (a pre-check): returns CIRCUIT_OPEN when the circuit would
     *     refuse the call, else kind UNSPECIFIED. When the circuit is half-open and
     *     this caller is granted its one probe, the answer is kind UNSPECIFIED with
     *     `circuit.state` CIRCUIT_STATE_HALF_OPEN: make the call, then report its
     *     outcome with `probe` set (no report within the probe timeout counts as a
     *     lost probe, and the circuit reopens).
     * Trust (docs/trust.md): any caller that reaches the sidecar may report. For a
     * service the sidecar calls itself (in `services:`, or a tool's service) a
     * report feeds its throttle and circuit, and a pre-check may take its probe,
     * only when `services.NAME.accept_reports` is true. Otherwise the report is
     * classified and answered with the same Failure but charges nothing, and a
     * pre-check only looks (CIRCUIT_OPEN or kind UNSPECIFIED, never the probe);
     * the server span's `sidecar.report.accepted` says which. A service named only
     * in reports gets a small guard of its own (at most 1000 are kept: the least
     * recently used without an open circuit or a probe out makes room). A
     * `service`, `parameter` or `resource_type` longer than 128 characters, or an
     * `endpoint` longer than 2048, is INVALID_INPUT naming the field.
     * </pre>
     */
    public void classifyFailure(dev.sidecar.v1.ClassifyFailureRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.Failure> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getClassifyFailureMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * ListTools lists the configured tools, with schemas ready for a model.
     * </pre>
     */
    public void listTools(dev.sidecar.v1.ListToolsRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.ListToolsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListToolsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * ListModels lists the model catalog, routes with their deployments.
     * </pre>
     */
    public void listModels(dev.sidecar.v1.ListModelsRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.ListModelsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListModelsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * StreamModel is CallModel, streamed: the same request, the same policy
     * before the first delta, and the reply as events. Deltas come as the model
     * writes them; a `restart` event says that what came before it is void (a
     * mid-stream fault retried, a truncated reply re-run, a correction); the
     * last event is `final`, with the whole reply as CallModel returns it. A
     * failure ends the stream with the same status and details as CallModel.
     * buf:lint:ignore RPC_REQUEST_STANDARD_NAME
     * </pre>
     */
    public void streamModel(dev.sidecar.v1.CallModelRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.StreamModelEvent> responseObserver) {
      io.grpc.stub.ClientCalls.asyncServerStreamingCall(
          getChannel().newCall(getStreamModelMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service Sidecar.
   * <pre>
   * Sidecar runs model calls and tool calls under one failure policy.
   * </pre>
   */
  public static final class SidecarBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<SidecarBlockingV2Stub> {
    private SidecarBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SidecarBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SidecarBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * ExecuteTool runs a configured tool. A tool's failure is a result (OK, with
     * `failure` set), never an RPC error: an unknown tool or arguments that are not
     * a JSON object are INVALID_INPUT results too. Only gRPC's own limits (message
     * size, deadline, cancellation) end the RPC with a status.
     * </pre>
     */
    public dev.sidecar.v1.ExecuteToolResponse executeTool(dev.sidecar.v1.ExecuteToolRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getExecuteToolMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * CallModel sends a conversation to a catalog model. Rate limits, overloads
     * and transient faults are retried beneath the caller; unusable replies are
     * corrected; what cannot succeed fails the RPC with a typed Failure.
     * </pre>
     */
    public dev.sidecar.v1.CallModelResponse callModel(dev.sidecar.v1.CallModelRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCallModelMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * ClassifyFailure maps what an agent's own tool saw onto the very Failure
     * the sidecar would have produced. When `service` is named, the report also
     * feeds that service's throttle and circuit. Three uses:
     *   * `response` or `fault` set: classify (and record) a failed call;
     *   * `response` with a 2xx status: record a success, returns kind UNSPECIFIED;
     *   * neither set (a pre-check): returns CIRCUIT_OPEN when the circuit would
     *     refuse the call, else kind UNSPECIFIED. When the circuit is half-open and
     *     this caller is granted its one probe, the answer is kind UNSPECIFIED with
     *     `circuit.state` CIRCUIT_STATE_HALF_OPEN: make the call, then report its
     *     outcome with `probe` set (no report within the probe timeout counts as a
     *     lost probe, and the circuit reopens).
     * Trust (docs/trust.md): any caller that reaches the sidecar may report. For a
     * service the sidecar calls itself (in `services:`, or a tool's service) a
     * report feeds its throttle and circuit, and a pre-check may take its probe,
     * only when `services.NAME.accept_reports` is true. Otherwise the report is
     * classified and answered with the same Failure but charges nothing, and a
     * pre-check only looks (CIRCUIT_OPEN or kind UNSPECIFIED, never the probe);
     * the server span's `sidecar.report.accepted` says which. A service named only
     * in reports gets a small guard of its own (at most 1000 are kept: the least
     * recently used without an open circuit or a probe out makes room). A
     * `service`, `parameter` or `resource_type` longer than 128 characters, or an
     * `endpoint` longer than 2048, is INVALID_INPUT naming the field.
     * </pre>
     */
    public dev.sidecar.v1.Failure classifyFailure(dev.sidecar.v1.ClassifyFailureRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getClassifyFailureMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * ListTools lists the configured tools, with schemas ready for a model.
     * </pre>
     */
    public dev.sidecar.v1.ListToolsResponse listTools(dev.sidecar.v1.ListToolsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListToolsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * ListModels lists the model catalog, routes with their deployments.
     * </pre>
     */
    public dev.sidecar.v1.ListModelsResponse listModels(dev.sidecar.v1.ListModelsRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getListModelsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * StreamModel is CallModel, streamed: the same request, the same policy
     * before the first delta, and the reply as events. Deltas come as the model
     * writes them; a `restart` event says that what came before it is void (a
     * mid-stream fault retried, a truncated reply re-run, a correction); the
     * last event is `final`, with the whole reply as CallModel returns it. A
     * failure ends the stream with the same status and details as CallModel.
     * buf:lint:ignore RPC_REQUEST_STANDARD_NAME
     * </pre>
     */
    @io.grpc.ExperimentalApi("https://github.com/grpc/grpc-java/issues/10918")
    public io.grpc.stub.BlockingClientCall<?, dev.sidecar.v1.StreamModelEvent>
        streamModel(dev.sidecar.v1.CallModelRequest request) {
      return io.grpc.stub.ClientCalls.blockingV2ServerStreamingCall(
          getChannel(), getStreamModelMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service Sidecar.
   * <pre>
   * Sidecar runs model calls and tool calls under one failure policy.
   * </pre>
   */
  public static final class SidecarBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<SidecarBlockingStub> {
    private SidecarBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SidecarBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SidecarBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * ExecuteTool runs a configured tool. A tool's failure is a result (OK, with
     * `failure` set), never an RPC error: an unknown tool or arguments that are not
     * a JSON object are INVALID_INPUT results too. Only gRPC's own limits (message
     * size, deadline, cancellation) end the RPC with a status.
     * </pre>
     */
    public dev.sidecar.v1.ExecuteToolResponse executeTool(dev.sidecar.v1.ExecuteToolRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getExecuteToolMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * CallModel sends a conversation to a catalog model. Rate limits, overloads
     * and transient faults are retried beneath the caller; unusable replies are
     * corrected; what cannot succeed fails the RPC with a typed Failure.
     * </pre>
     */
    public dev.sidecar.v1.CallModelResponse callModel(dev.sidecar.v1.CallModelRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCallModelMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * ClassifyFailure maps what an agent's own tool saw onto the very Failure
     * the sidecar would have produced. When `service` is named, the report also
     * feeds that service's throttle and circuit. Three uses:
     *   * `response` or `fault` set: classify (and record) a failed call;
     *   * `response` with a 2xx status: record a success, returns kind UNSPECIFIED;
     *   * neither set (a pre-check): returns CIRCUIT_OPEN when the circuit would
     *     refuse the call, else kind UNSPECIFIED. When the circuit is half-open and
     *     this caller is granted its one probe, the answer is kind UNSPECIFIED with
     *     `circuit.state` CIRCUIT_STATE_HALF_OPEN: make the call, then report its
     *     outcome with `probe` set (no report within the probe timeout counts as a
     *     lost probe, and the circuit reopens).
     * Trust (docs/trust.md): any caller that reaches the sidecar may report. For a
     * service the sidecar calls itself (in `services:`, or a tool's service) a
     * report feeds its throttle and circuit, and a pre-check may take its probe,
     * only when `services.NAME.accept_reports` is true. Otherwise the report is
     * classified and answered with the same Failure but charges nothing, and a
     * pre-check only looks (CIRCUIT_OPEN or kind UNSPECIFIED, never the probe);
     * the server span's `sidecar.report.accepted` says which. A service named only
     * in reports gets a small guard of its own (at most 1000 are kept: the least
     * recently used without an open circuit or a probe out makes room). A
     * `service`, `parameter` or `resource_type` longer than 128 characters, or an
     * `endpoint` longer than 2048, is INVALID_INPUT naming the field.
     * </pre>
     */
    public dev.sidecar.v1.Failure classifyFailure(dev.sidecar.v1.ClassifyFailureRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getClassifyFailureMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * ListTools lists the configured tools, with schemas ready for a model.
     * </pre>
     */
    public dev.sidecar.v1.ListToolsResponse listTools(dev.sidecar.v1.ListToolsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListToolsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * ListModels lists the model catalog, routes with their deployments.
     * </pre>
     */
    public dev.sidecar.v1.ListModelsResponse listModels(dev.sidecar.v1.ListModelsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListModelsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * StreamModel is CallModel, streamed: the same request, the same policy
     * before the first delta, and the reply as events. Deltas come as the model
     * writes them; a `restart` event says that what came before it is void (a
     * mid-stream fault retried, a truncated reply re-run, a correction); the
     * last event is `final`, with the whole reply as CallModel returns it. A
     * failure ends the stream with the same status and details as CallModel.
     * buf:lint:ignore RPC_REQUEST_STANDARD_NAME
     * </pre>
     */
    public java.util.Iterator<dev.sidecar.v1.StreamModelEvent> streamModel(
        dev.sidecar.v1.CallModelRequest request) {
      return io.grpc.stub.ClientCalls.blockingServerStreamingCall(
          getChannel(), getStreamModelMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service Sidecar.
   * <pre>
   * Sidecar runs model calls and tool calls under one failure policy.
   * </pre>
   */
  public static final class SidecarFutureStub
      extends io.grpc.stub.AbstractFutureStub<SidecarFutureStub> {
    private SidecarFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SidecarFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SidecarFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * ExecuteTool runs a configured tool. A tool's failure is a result (OK, with
     * `failure` set), never an RPC error: an unknown tool or arguments that are not
     * a JSON object are INVALID_INPUT results too. Only gRPC's own limits (message
     * size, deadline, cancellation) end the RPC with a status.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.sidecar.v1.ExecuteToolResponse> executeTool(
        dev.sidecar.v1.ExecuteToolRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getExecuteToolMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * CallModel sends a conversation to a catalog model. Rate limits, overloads
     * and transient faults are retried beneath the caller; unusable replies are
     * corrected; what cannot succeed fails the RPC with a typed Failure.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.sidecar.v1.CallModelResponse> callModel(
        dev.sidecar.v1.CallModelRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCallModelMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * ClassifyFailure maps what an agent's own tool saw onto the very Failure
     * the sidecar would have produced. When `service` is named, the report also
     * feeds that service's throttle and circuit. Three uses:
     *   * `response` or `fault` set: classify (and record) a failed call;
     *   * `response` with a 2xx status: record a success, returns kind UNSPECIFIED;
     *   * neither set (a pre-check): returns CIRCUIT_OPEN when the circuit would
     *     refuse the call, else kind UNSPECIFIED. When the circuit is half-open and
     *     this caller is granted its one probe, the answer is kind UNSPECIFIED with
     *     `circuit.state` CIRCUIT_STATE_HALF_OPEN: make the call, then report its
     *     outcome with `probe` set (no report within the probe timeout counts as a
     *     lost probe, and the circuit reopens).
     * Trust (docs/trust.md): any caller that reaches the sidecar may report. For a
     * service the sidecar calls itself (in `services:`, or a tool's service) a
     * report feeds its throttle and circuit, and a pre-check may take its probe,
     * only when `services.NAME.accept_reports` is true. Otherwise the report is
     * classified and answered with the same Failure but charges nothing, and a
     * pre-check only looks (CIRCUIT_OPEN or kind UNSPECIFIED, never the probe);
     * the server span's `sidecar.report.accepted` says which. A service named only
     * in reports gets a small guard of its own (at most 1000 are kept: the least
     * recently used without an open circuit or a probe out makes room). A
     * `service`, `parameter` or `resource_type` longer than 128 characters, or an
     * `endpoint` longer than 2048, is INVALID_INPUT naming the field.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.sidecar.v1.Failure> classifyFailure(
        dev.sidecar.v1.ClassifyFailureRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getClassifyFailureMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * ListTools lists the configured tools, with schemas ready for a model.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.sidecar.v1.ListToolsResponse> listTools(
        dev.sidecar.v1.ListToolsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListToolsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * ListModels lists the model catalog, routes with their deployments.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.sidecar.v1.ListModelsResponse> listModels(
        dev.sidecar.v1.ListModelsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListModelsMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_EXECUTE_TOOL = 0;
  private static final int METHODID_CALL_MODEL = 1;
  private static final int METHODID_CLASSIFY_FAILURE = 2;
  private static final int METHODID_LIST_TOOLS = 3;
  private static final int METHODID_LIST_MODELS = 4;
  private static final int METHODID_STREAM_MODEL = 5;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final AsyncService serviceImpl;
    private final int methodId;

    MethodHandlers(AsyncService serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_EXECUTE_TOOL:
          serviceImpl.executeTool((dev.sidecar.v1.ExecuteToolRequest) request,
              (io.grpc.stub.StreamObserver<dev.sidecar.v1.ExecuteToolResponse>) responseObserver);
          break;
        case METHODID_CALL_MODEL:
          serviceImpl.callModel((dev.sidecar.v1.CallModelRequest) request,
              (io.grpc.stub.StreamObserver<dev.sidecar.v1.CallModelResponse>) responseObserver);
          break;
        case METHODID_CLASSIFY_FAILURE:
          serviceImpl.classifyFailure((dev.sidecar.v1.ClassifyFailureRequest) request,
              (io.grpc.stub.StreamObserver<dev.sidecar.v1.Failure>) responseObserver);
          break;
        case METHODID_LIST_TOOLS:
          serviceImpl.listTools((dev.sidecar.v1.ListToolsRequest) request,
              (io.grpc.stub.StreamObserver<dev.sidecar.v1.ListToolsResponse>) responseObserver);
          break;
        case METHODID_LIST_MODELS:
          serviceImpl.listModels((dev.sidecar.v1.ListModelsRequest) request,
              (io.grpc.stub.StreamObserver<dev.sidecar.v1.ListModelsResponse>) responseObserver);
          break;
        case METHODID_STREAM_MODEL:
          serviceImpl.streamModel((dev.sidecar.v1.CallModelRequest) request,
              (io.grpc.stub.StreamObserver<dev.sidecar.v1.StreamModelEvent>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        default:
          throw new AssertionError();
      }
    }
  }

  public static final io.grpc.ServerServiceDefinition bindService(AsyncService service) {
    return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
        .addMethod(
          getExecuteToolMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.sidecar.v1.ExecuteToolRequest,
              dev.sidecar.v1.ExecuteToolResponse>(
                service, METHODID_EXECUTE_TOOL)))
        .addMethod(
          getCallModelMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.sidecar.v1.CallModelRequest,
              dev.sidecar.v1.CallModelResponse>(
                service, METHODID_CALL_MODEL)))
        .addMethod(
          getClassifyFailureMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.sidecar.v1.ClassifyFailureRequest,
              dev.sidecar.v1.Failure>(
                service, METHODID_CLASSIFY_FAILURE)))
        .addMethod(
          getListToolsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.sidecar.v1.ListToolsRequest,
              dev.sidecar.v1.ListToolsResponse>(
                service, METHODID_LIST_TOOLS)))
        .addMethod(
          getListModelsMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.sidecar.v1.ListModelsRequest,
              dev.sidecar.v1.ListModelsResponse>(
                service, METHODID_LIST_MODELS)))
        .addMethod(
          getStreamModelMethod(),
          io.grpc.stub.ServerCalls.asyncServerStreamingCall(
            new MethodHandlers<
              dev.sidecar.v1.CallModelRequest,
              dev.sidecar.v1.StreamModelEvent>(
                service, METHODID_STREAM_MODEL)))
        .build();
  }

  private static abstract class SidecarBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    SidecarBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.sidecar.v1.SidecarOuterClass.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("Sidecar");
    }
  }

  private static final class SidecarFileDescriptorSupplier
      extends SidecarBaseDescriptorSupplier {
    SidecarFileDescriptorSupplier() {}
  }

  private static final class SidecarMethodDescriptorSupplier
      extends SidecarBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    SidecarMethodDescriptorSupplier(java.lang.String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (SidecarGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new SidecarFileDescriptorSupplier())
              .addMethod(getExecuteToolMethod())
              .addMethod(getCallModelMethod())
              .addMethod(getClassifyFailureMethod())
              .addMethod(getListToolsMethod())
              .addMethod(getListModelsMethod())
              .addMethod(getStreamModelMethod())
              .build();
        }
      }
    }
    return result;
  }
}
