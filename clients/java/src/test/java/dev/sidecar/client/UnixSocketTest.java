package dev.sidecar.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.grpc.Server;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import dev.sidecar.v1.ListModelsResponse;
import dev.sidecar.v1.ModelInfo;

/** {@code unix:/path} targets reach a sidecar listening on a Unix domain socket. */
class UnixSocketTest {
  /** Netty warns once per Unix-socket connection that SO_KEEPALIVE does not apply; harmless here. */
  private static final Logger BOOTSTRAP =
      Logger.getLogger("io.grpc.netty.shaded.io.netty.bootstrap");

  static {
    BOOTSTRAP.setLevel(Level.SEVERE);
  }

  @Test
  void aUnixTargetReachesASocketServer(@TempDir Path dir) throws Exception {
    Assumptions.assumeTrue(Epoll.isAvailable(), "epoll (Linux) is needed for Unix domain sockets");
    Path socket = dir.resolve("sidecar.sock");
    FakeSidecar sidecar = new FakeSidecar();
    EventLoopGroup group = new EpollEventLoopGroup(1);
    Server server =
        NettyServerBuilder.forAddress(new DomainSocketAddress(socket.toString()))
            .channelType(EpollServerDomainSocketChannel.class)
            .bossEventLoopGroup(group)
            .workerEventLoopGroup(group)
            .addService(sidecar.definition())
            .build()
            .start();
    try (SidecarClient client = SidecarClient.connect("unix:" + socket)) {
      sidecar.listModels =
          (request, response) -> {
            response.onNext(ListModelsResponse.newBuilder().addModels(ModelInfo.newBuilder().setId("m1")).build());
            response.onCompleted();
          };
      assertEquals("m1", client.listModels(Duration.ofSeconds(5)).getModels(0).getId());
    } finally {
      server.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
      group.shutdownGracefully(0, 1, TimeUnit.SECONDS).sync();
      Files.deleteIfExists(socket);
    }
  }
}
