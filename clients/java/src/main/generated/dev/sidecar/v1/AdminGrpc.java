package dev.sidecar.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Admin is the live policy state of this process and the operator actions.
 * </pre>
 */
@io.grpc.stub.annotations.GrpcGenerated
public final class AdminGrpc {

  private AdminGrpc() {}

  public static final java.lang.String SERVICE_NAME = "sidecar.v1.Admin";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<dev.sidecar.v1.GetStateRequest,
      dev.sidecar.v1.GetStateResponse> getGetStateMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetState",
      requestType = dev.sidecar.v1.GetStateRequest.class,
      responseType = dev.sidecar.v1.GetStateResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.sidecar.v1.GetStateRequest,
      dev.sidecar.v1.GetStateResponse> getGetStateMethod() {
    io.grpc.MethodDescriptor<dev.sidecar.v1.GetStateRequest, dev.sidecar.v1.GetStateResponse> getGetStateMethod;
    if ((getGetStateMethod = AdminGrpc.getGetStateMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getGetStateMethod = AdminGrpc.getGetStateMethod) == null) {
          AdminGrpc.getGetStateMethod = getGetStateMethod =
              io.grpc.MethodDescriptor.<dev.sidecar.v1.GetStateRequest, dev.sidecar.v1.GetStateResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetState"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.GetStateRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.GetStateResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("GetState"))
              .build();
        }
      }
    }
    return getGetStateMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.sidecar.v1.CloseCircuitRequest,
      dev.sidecar.v1.CloseCircuitResponse> getCloseCircuitMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CloseCircuit",
      requestType = dev.sidecar.v1.CloseCircuitRequest.class,
      responseType = dev.sidecar.v1.CloseCircuitResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.sidecar.v1.CloseCircuitRequest,
      dev.sidecar.v1.CloseCircuitResponse> getCloseCircuitMethod() {
    io.grpc.MethodDescriptor<dev.sidecar.v1.CloseCircuitRequest, dev.sidecar.v1.CloseCircuitResponse> getCloseCircuitMethod;
    if ((getCloseCircuitMethod = AdminGrpc.getCloseCircuitMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getCloseCircuitMethod = AdminGrpc.getCloseCircuitMethod) == null) {
          AdminGrpc.getCloseCircuitMethod = getCloseCircuitMethod =
              io.grpc.MethodDescriptor.<dev.sidecar.v1.CloseCircuitRequest, dev.sidecar.v1.CloseCircuitResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CloseCircuit"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.CloseCircuitRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.CloseCircuitResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("CloseCircuit"))
              .build();
        }
      }
    }
    return getCloseCircuitMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.sidecar.v1.LiftPauseRequest,
      dev.sidecar.v1.LiftPauseResponse> getLiftPauseMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "LiftPause",
      requestType = dev.sidecar.v1.LiftPauseRequest.class,
      responseType = dev.sidecar.v1.LiftPauseResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.sidecar.v1.LiftPauseRequest,
      dev.sidecar.v1.LiftPauseResponse> getLiftPauseMethod() {
    io.grpc.MethodDescriptor<dev.sidecar.v1.LiftPauseRequest, dev.sidecar.v1.LiftPauseResponse> getLiftPauseMethod;
    if ((getLiftPauseMethod = AdminGrpc.getLiftPauseMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getLiftPauseMethod = AdminGrpc.getLiftPauseMethod) == null) {
          AdminGrpc.getLiftPauseMethod = getLiftPauseMethod =
              io.grpc.MethodDescriptor.<dev.sidecar.v1.LiftPauseRequest, dev.sidecar.v1.LiftPauseResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "LiftPause"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.LiftPauseRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.LiftPauseResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("LiftPause"))
              .build();
        }
      }
    }
    return getLiftPauseMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.sidecar.v1.ResetSpendRequest,
      dev.sidecar.v1.ResetSpendResponse> getResetSpendMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ResetSpend",
      requestType = dev.sidecar.v1.ResetSpendRequest.class,
      responseType = dev.sidecar.v1.ResetSpendResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.sidecar.v1.ResetSpendRequest,
      dev.sidecar.v1.ResetSpendResponse> getResetSpendMethod() {
    io.grpc.MethodDescriptor<dev.sidecar.v1.ResetSpendRequest, dev.sidecar.v1.ResetSpendResponse> getResetSpendMethod;
    if ((getResetSpendMethod = AdminGrpc.getResetSpendMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getResetSpendMethod = AdminGrpc.getResetSpendMethod) == null) {
          AdminGrpc.getResetSpendMethod = getResetSpendMethod =
              io.grpc.MethodDescriptor.<dev.sidecar.v1.ResetSpendRequest, dev.sidecar.v1.ResetSpendResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ResetSpend"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.ResetSpendRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.ResetSpendResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("ResetSpend"))
              .build();
        }
      }
    }
    return getResetSpendMethod;
  }

  private static volatile io.grpc.MethodDescriptor<dev.sidecar.v1.ReloadRequest,
      dev.sidecar.v1.ReloadResponse> getReloadMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Reload",
      requestType = dev.sidecar.v1.ReloadRequest.class,
      responseType = dev.sidecar.v1.ReloadResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<dev.sidecar.v1.ReloadRequest,
      dev.sidecar.v1.ReloadResponse> getReloadMethod() {
    io.grpc.MethodDescriptor<dev.sidecar.v1.ReloadRequest, dev.sidecar.v1.ReloadResponse> getReloadMethod;
    if ((getReloadMethod = AdminGrpc.getReloadMethod) == null) {
      synchronized (AdminGrpc.class) {
        if ((getReloadMethod = AdminGrpc.getReloadMethod) == null) {
          AdminGrpc.getReloadMethod = getReloadMethod =
              io.grpc.MethodDescriptor.<dev.sidecar.v1.ReloadRequest, dev.sidecar.v1.ReloadResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Reload"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.ReloadRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  dev.sidecar.v1.ReloadResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminMethodDescriptorSupplier("Reload"))
              .build();
        }
      }
    }
    return getReloadMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static AdminStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminStub>() {
        @java.lang.Override
        public AdminStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminStub(channel, callOptions);
        }
      };
    return AdminStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports all types of calls on the service
   */
  public static AdminBlockingV2Stub newBlockingV2Stub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminBlockingV2Stub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminBlockingV2Stub>() {
        @java.lang.Override
        public AdminBlockingV2Stub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminBlockingV2Stub(channel, callOptions);
        }
      };
    return AdminBlockingV2Stub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static AdminBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminBlockingStub>() {
        @java.lang.Override
        public AdminBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminBlockingStub(channel, callOptions);
        }
      };
    return AdminBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static AdminFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminFutureStub>() {
        @java.lang.Override
        public AdminFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminFutureStub(channel, callOptions);
        }
      };
    return AdminFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Admin is the live policy state of this process and the operator actions.
   * </pre>
   */
  public interface AsyncService {

    /**
     * <pre>
     * GetState is the live state view: the document `GET /admin/state` answers
     * on the HTTP port, as typed messages.
     * </pre>
     */
    default void getState(dev.sidecar.v1.GetStateRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.GetStateResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetStateMethod(), responseObserver);
    }

    /**
     * <pre>
     * CloseCircuit closes a tool service's (else a route deployment's) circuit,
     * as a successful probe closes it; with Redis, fleet-wide. NOT_FOUND for a
     * name this process does not hold.
     * </pre>
     */
    default void closeCircuit(dev.sidecar.v1.CloseCircuitRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.CloseCircuitResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCloseCircuitMethod(), responseObserver);
    }

    /**
     * <pre>
     * LiftPause ends a model's Retry-After pause; with Redis, fleet-wide.
     * NOT_FOUND for a model not in the catalog.
     * </pre>
     */
    default void liftPause(dev.sidecar.v1.LiftPauseRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.LiftPauseResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getLiftPauseMethod(), responseObserver);
    }

    /**
     * <pre>
     * ResetSpend forgives a workflow's recorded spend (what was_usd says); with
     * Redis, fleet-wide.
     * </pre>
     */
    default void resetSpend(dev.sidecar.v1.ResetSpendRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.ResetSpendResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getResetSpendMethod(), responseObserver);
    }

    /**
     * <pre>
     * Reload loads the config file again and swaps it in when it is valid; a
     * refused file is answered OK with `applied` false and the error
     * check-config gives (a file serving no model and no tool is refused). A
     * file that keeps none of the running config's models and tools is refused
     * too (`force_required`), unless the request sets `force`.
     * FAILED_PRECONDITION when this process cannot reload.
     * </pre>
     */
    default void reload(dev.sidecar.v1.ReloadRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.ReloadResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getReloadMethod(), responseObserver);
    }
  }

  /**
   * Base class for the server implementation of the service Admin.
   * <pre>
   * Admin is the live policy state of this process and the operator actions.
   * </pre>
   */
  public static abstract class AdminImplBase
      implements io.grpc.BindableService, AsyncService {

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return AdminGrpc.bindService(this);
    }
  }

  /**
   * A stub to allow clients to do asynchronous rpc calls to service Admin.
   * <pre>
   * Admin is the live policy state of this process and the operator actions.
   * </pre>
   */
  public static final class AdminStub
      extends io.grpc.stub.AbstractAsyncStub<AdminStub> {
    private AdminStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminStub(channel, callOptions);
    }

    /**
     * <pre>
     * GetState is the live state view: the document `GET /admin/state` answers
     * on the HTTP port, as typed messages.
     * </pre>
     */
    public void getState(dev.sidecar.v1.GetStateRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.GetStateResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetStateMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * CloseCircuit closes a tool service's (else a route deployment's) circuit,
     * as a successful probe closes it; with Redis, fleet-wide. NOT_FOUND for a
     * name this process does not hold.
     * </pre>
     */
    public void closeCircuit(dev.sidecar.v1.CloseCircuitRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.CloseCircuitResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCloseCircuitMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * LiftPause ends a model's Retry-After pause; with Redis, fleet-wide.
     * NOT_FOUND for a model not in the catalog.
     * </pre>
     */
    public void liftPause(dev.sidecar.v1.LiftPauseRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.LiftPauseResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getLiftPauseMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * ResetSpend forgives a workflow's recorded spend (what was_usd says); with
     * Redis, fleet-wide.
     * </pre>
     */
    public void resetSpend(dev.sidecar.v1.ResetSpendRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.ResetSpendResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getResetSpendMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Reload loads the config file again and swaps it in when it is valid; a
     * refused file is answered OK with `applied` false and the error
     * check-config gives (a file serving no model and no tool is refused). A
     * file that keeps none of the running config's models and tools is refused
     * too (`force_required`), unless the request sets `force`.
     * FAILED_PRECONDITION when this process cannot reload.
     * </pre>
     */
    public void reload(dev.sidecar.v1.ReloadRequest request,
        io.grpc.stub.StreamObserver<dev.sidecar.v1.ReloadResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getReloadMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * A stub to allow clients to do synchronous rpc calls to service Admin.
   * <pre>
   * Admin is the live policy state of this process and the operator actions.
   * </pre>
   */
  public static final class AdminBlockingV2Stub
      extends io.grpc.stub.AbstractBlockingStub<AdminBlockingV2Stub> {
    private AdminBlockingV2Stub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminBlockingV2Stub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminBlockingV2Stub(channel, callOptions);
    }

    /**
     * <pre>
     * GetState is the live state view: the document `GET /admin/state` answers
     * on the HTTP port, as typed messages.
     * </pre>
     */
    public dev.sidecar.v1.GetStateResponse getState(dev.sidecar.v1.GetStateRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getGetStateMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * CloseCircuit closes a tool service's (else a route deployment's) circuit,
     * as a successful probe closes it; with Redis, fleet-wide. NOT_FOUND for a
     * name this process does not hold.
     * </pre>
     */
    public dev.sidecar.v1.CloseCircuitResponse closeCircuit(dev.sidecar.v1.CloseCircuitRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getCloseCircuitMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * LiftPause ends a model's Retry-After pause; with Redis, fleet-wide.
     * NOT_FOUND for a model not in the catalog.
     * </pre>
     */
    public dev.sidecar.v1.LiftPauseResponse liftPause(dev.sidecar.v1.LiftPauseRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getLiftPauseMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * ResetSpend forgives a workflow's recorded spend (what was_usd says); with
     * Redis, fleet-wide.
     * </pre>
     */
    public dev.sidecar.v1.ResetSpendResponse resetSpend(dev.sidecar.v1.ResetSpendRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getResetSpendMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Reload loads the config file again and swaps it in when it is valid; a
     * refused file is answered OK with `applied` false and the error
     * check-config gives (a file serving no model and no tool is refused). A
     * file that keeps none of the running config's models and tools is refused
     * too (`force_required`), unless the request sets `force`.
     * FAILED_PRECONDITION when this process cannot reload.
     * </pre>
     */
    public dev.sidecar.v1.ReloadResponse reload(dev.sidecar.v1.ReloadRequest request) throws io.grpc.StatusException {
      return io.grpc.stub.ClientCalls.blockingV2UnaryCall(
          getChannel(), getReloadMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do limited synchronous rpc calls to service Admin.
   * <pre>
   * Admin is the live policy state of this process and the operator actions.
   * </pre>
   */
  public static final class AdminBlockingStub
      extends io.grpc.stub.AbstractBlockingStub<AdminBlockingStub> {
    private AdminBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * GetState is the live state view: the document `GET /admin/state` answers
     * on the HTTP port, as typed messages.
     * </pre>
     */
    public dev.sidecar.v1.GetStateResponse getState(dev.sidecar.v1.GetStateRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetStateMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * CloseCircuit closes a tool service's (else a route deployment's) circuit,
     * as a successful probe closes it; with Redis, fleet-wide. NOT_FOUND for a
     * name this process does not hold.
     * </pre>
     */
    public dev.sidecar.v1.CloseCircuitResponse closeCircuit(dev.sidecar.v1.CloseCircuitRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCloseCircuitMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * LiftPause ends a model's Retry-After pause; with Redis, fleet-wide.
     * NOT_FOUND for a model not in the catalog.
     * </pre>
     */
    public dev.sidecar.v1.LiftPauseResponse liftPause(dev.sidecar.v1.LiftPauseRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getLiftPauseMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * ResetSpend forgives a workflow's recorded spend (what was_usd says); with
     * Redis, fleet-wide.
     * </pre>
     */
    public dev.sidecar.v1.ResetSpendResponse resetSpend(dev.sidecar.v1.ResetSpendRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getResetSpendMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Reload loads the config file again and swaps it in when it is valid; a
     * refused file is answered OK with `applied` false and the error
     * check-config gives (a file serving no model and no tool is refused). A
     * file that keeps none of the running config's models and tools is refused
     * too (`force_required`), unless the request sets `force`.
     * FAILED_PRECONDITION when this process cannot reload.
     * </pre>
     */
    public dev.sidecar.v1.ReloadResponse reload(dev.sidecar.v1.ReloadRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getReloadMethod(), getCallOptions(), request);
    }
  }

  /**
   * A stub to allow clients to do ListenableFuture-style rpc calls to service Admin.
   * <pre>
   * Admin is the live policy state of this process and the operator actions.
   * </pre>
   */
  public static final class AdminFutureStub
      extends io.grpc.stub.AbstractFutureStub<AdminFutureStub> {
    private AdminFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * GetState is the live state view: the document `GET /admin/state` answers
     * on the HTTP port, as typed messages.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.sidecar.v1.GetStateResponse> getState(
        dev.sidecar.v1.GetStateRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetStateMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * CloseCircuit closes a tool service's (else a route deployment's) circuit,
     * as a successful probe closes it; with Redis, fleet-wide. NOT_FOUND for a
     * name this process does not hold.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.sidecar.v1.CloseCircuitResponse> closeCircuit(
        dev.sidecar.v1.CloseCircuitRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCloseCircuitMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * LiftPause ends a model's Retry-After pause; with Redis, fleet-wide.
     * NOT_FOUND for a model not in the catalog.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.sidecar.v1.LiftPauseResponse> liftPause(
        dev.sidecar.v1.LiftPauseRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getLiftPauseMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * ResetSpend forgives a workflow's recorded spend (what was_usd says); with
     * Redis, fleet-wide.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.sidecar.v1.ResetSpendResponse> resetSpend(
        dev.sidecar.v1.ResetSpendRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getResetSpendMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Reload loads the config file again and swaps it in when it is valid; a
     * refused file is answered OK with `applied` false and the error
     * check-config gives (a file serving no model and no tool is refused). A
     * file that keeps none of the running config's models and tools is refused
     * too (`force_required`), unless the request sets `force`.
     * FAILED_PRECONDITION when this process cannot reload.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<dev.sidecar.v1.ReloadResponse> reload(
        dev.sidecar.v1.ReloadRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getReloadMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_GET_STATE = 0;
  private static final int METHODID_CLOSE_CIRCUIT = 1;
  private static final int METHODID_LIFT_PAUSE = 2;
  private static final int METHODID_RESET_SPEND = 3;
  private static final int METHODID_RELOAD = 4;

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
        case METHODID_GET_STATE:
          serviceImpl.getState((dev.sidecar.v1.GetStateRequest) request,
              (io.grpc.stub.StreamObserver<dev.sidecar.v1.GetStateResponse>) responseObserver);
          break;
        case METHODID_CLOSE_CIRCUIT:
          serviceImpl.closeCircuit((dev.sidecar.v1.CloseCircuitRequest) request,
              (io.grpc.stub.StreamObserver<dev.sidecar.v1.CloseCircuitResponse>) responseObserver);
          break;
        case METHODID_LIFT_PAUSE:
          serviceImpl.liftPause((dev.sidecar.v1.LiftPauseRequest) request,
              (io.grpc.stub.StreamObserver<dev.sidecar.v1.LiftPauseResponse>) responseObserver);
          break;
        case METHODID_RESET_SPEND:
          serviceImpl.resetSpend((dev.sidecar.v1.ResetSpendRequest) request,
              (io.grpc.stub.StreamObserver<dev.sidecar.v1.ResetSpendResponse>) responseObserver);
          break;
        case METHODID_RELOAD:
          serviceImpl.reload((dev.sidecar.v1.ReloadRequest) request,
              (io.grpc.stub.StreamObserver<dev.sidecar.v1.ReloadResponse>) responseObserver);
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
          getGetStateMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.sidecar.v1.GetStateRequest,
              dev.sidecar.v1.GetStateResponse>(
                service, METHODID_GET_STATE)))
        .addMethod(
          getCloseCircuitMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.sidecar.v1.CloseCircuitRequest,
              dev.sidecar.v1.CloseCircuitResponse>(
                service, METHODID_CLOSE_CIRCUIT)))
        .addMethod(
          getLiftPauseMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.sidecar.v1.LiftPauseRequest,
              dev.sidecar.v1.LiftPauseResponse>(
                service, METHODID_LIFT_PAUSE)))
        .addMethod(
          getResetSpendMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.sidecar.v1.ResetSpendRequest,
              dev.sidecar.v1.ResetSpendResponse>(
                service, METHODID_RESET_SPEND)))
        .addMethod(
          getReloadMethod(),
          io.grpc.stub.ServerCalls.asyncUnaryCall(
            new MethodHandlers<
              dev.sidecar.v1.ReloadRequest,
              dev.sidecar.v1.ReloadResponse>(
                service, METHODID_RELOAD)))
        .build();
  }

  private static abstract class AdminBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    AdminBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return dev.sidecar.v1.AdminOuterClass.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("Admin");
    }
  }

  private static final class AdminFileDescriptorSupplier
      extends AdminBaseDescriptorSupplier {
    AdminFileDescriptorSupplier() {}
  }

  private static final class AdminMethodDescriptorSupplier
      extends AdminBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final java.lang.String methodName;

    AdminMethodDescriptorSupplier(java.lang.String methodName) {
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
      synchronized (AdminGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new AdminFileDescriptorSupplier())
              .addMethod(getGetStateMethod())
              .addMethod(getCloseCircuitMethod())
              .addMethod(getLiftPauseMethod())
              .addMethod(getResetSpendMethod())
              .addMethod(getReloadMethod())
              .build();
        }
      }
    }
    return result;
  }
}
