package dev.sidecar.client;

import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import java.io.IOException;
import java.util.concurrent.TimeUnit;
import dev.sidecar.v1.CallModelRequest;
import dev.sidecar.v1.CallModelResponse;
import dev.sidecar.v1.ClassifyFailureRequest;
import dev.sidecar.v1.ExecuteToolRequest;
import dev.sidecar.v1.ExecuteToolResponse;
import dev.sidecar.v1.Failure;
import dev.sidecar.v1.ListModelsRequest;
import dev.sidecar.v1.ListModelsResponse;
import dev.sidecar.v1.ListToolsRequest;
import dev.sidecar.v1.ListToolsResponse;
import dev.sidecar.v1.SidecarGrpc;
import dev.sidecar.v1.StreamModelEvent;

/**
 * A sidecar whose every method is a handler the test sets; {@link #onLoopback()} serves it on a
 * loopback port, {@link #definition()} lets a test serve it elsewhere.
 */
public final class FakeSidecar implements AutoCloseable {
  public volatile ServerCalls.UnaryMethod<ExecuteToolRequest, ExecuteToolResponse> executeTool = unimplemented();
  public volatile ServerCalls.UnaryMethod<CallModelRequest, CallModelResponse> callModel = unimplemented();
  public volatile ServerCalls.UnaryMethod<ClassifyFailureRequest, Failure> classifyFailure = unimplemented();
  public volatile ServerCalls.UnaryMethod<ListToolsRequest, ListToolsResponse> listTools = unimplemented();
  public volatile ServerCalls.UnaryMethod<ListModelsRequest, ListModelsResponse> listModels = unimplemented();
  public volatile ServerCalls.ServerStreamingMethod<CallModelRequest, StreamModelEvent> streamModel =
      (request, response) ->
          response.onError(io.grpc.Status.UNIMPLEMENTED.withDescription("not scripted").asRuntimeException());

  private Server server;

  /** A fake serving on a free loopback port. */
  public static FakeSidecar onLoopback() throws IOException {
    FakeSidecar fake = new FakeSidecar();
    fake.server =
        Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create())
            .addService(fake.definition())
            .build()
            .start();
    return fake;
  }

  /** {@code localhost:PORT}. */
  public String target() {
    return "localhost:" + server.getPort();
  }

  public ServerServiceDefinition definition() {
    return SidecarGrpc.bindService(
        new SidecarGrpc.AsyncService() {
          @Override
          public void executeTool(ExecuteToolRequest request, StreamObserver<ExecuteToolResponse> response) {
            executeTool.invoke(request, response);
          }

          @Override
          public void callModel(CallModelRequest request, StreamObserver<CallModelResponse> response) {
            callModel.invoke(request, response);
          }

          @Override
          public void classifyFailure(ClassifyFailureRequest request, StreamObserver<Failure> response) {
            classifyFailure.invoke(request, response);
          }

          @Override
          public void listTools(ListToolsRequest request, StreamObserver<ListToolsResponse> response) {
            listTools.invoke(request, response);
          }

          @Override
          public void listModels(ListModelsRequest request, StreamObserver<ListModelsResponse> response) {
            listModels.invoke(request, response);
          }

          @Override
          public void streamModel(CallModelRequest request, StreamObserver<StreamModelEvent> response) {
            streamModel.invoke(request, response);
          }
        });
  }

  private static <Q, R> ServerCalls.UnaryMethod<Q, R> unimplemented() {
    return (request, response) ->
        response.onError(io.grpc.Status.UNIMPLEMENTED.withDescription("not scripted").asRuntimeException());
  }

  @Override
  public void close() throws InterruptedException {
    if (server != null) {
      server.shutdownNow();
      server.awaitTermination(5, TimeUnit.SECONDS);
    }
  }
}
