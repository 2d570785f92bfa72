package dev.keysmith.client;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The Java client against a running server without a token, beside the bare loop it is compared
 * with, in one run: {@code ./bench.sh --url URL --sequence NAME --seconds S --threads N
 * [--max-block B]} (NAME must exist; leases of up to B values, by default the server's
 * --max-count read from /openapi.json). Prints only lines {@code <case>\t<per_second>}: bare ({@link
 * AtomicLong#incrementAndGet}, one thread), bare_8 (N threads on one counter), next (cached {@link
 * KeysmithSequence#next()}, one thread), next_8 (N threads on one handle), next_n100 (values/s
 * through {@link KeysmithSequence#nextRange}(100)), worker_ids ({@link TimeIdGenerator#next()}
 * over a worker lease), request (one HTTP request per value, {@link KeysmithClient#next(String,
 * long)}) and livez (a keep-alive GET /livez loop with the same HTTP client settings). Each case
 * runs once unmeasured first (the JIT), then for S seconds.
 */
public final class Bench {
  private Bench() {}

  static volatile long sink;

  /** One thread's loop until {@code end} (System.nanoTime): how many values it took. */
  interface Loop {
    long run(long end);
  }

  /** The bare loop uses its values as the others do (a sum), so that none is optimized away. */
  static long bare(AtomicLong counter, long end) {
    long n = 0;
    long sum = 0;
    do {
      for (int i = 0; i < 10_000; i++) {
        sum += counter.incrementAndGet();
      }
      n += 10_000;
    } while (System.nanoTime() < end);
    sink = sum;
    return n;
  }

  static long next(KeysmithSequence seq, long end) {
    long n = 0;
    long sum = 0;
    do {
      for (int i = 0; i < 10_000; i++) {
        sum += seq.next();
      }
      n += 10_000;
    } while (System.nanoTime() < end);
    sink = sum;
    return n;
  }

  static long nextRange(KeysmithSequence seq, long end) {
    long n = 0;
    long sum = 0;
    do {
      for (int i = 0; i < 1_000; i++) {
        sum += seq.nextRange(100).start();
      }
      n += 100_000;
    } while (System.nanoTime() < end);
    sink = sum;
    return n;
  }

  static long ids(TimeIdGenerator ids, long end) {
    long n = 0;
    long sum = 0;
    do {
      for (int i = 0; i < 1_000; i++) {
        sum += ids.next();
      }
      n += 1_000;
    } while (System.nanoTime() < end);
    sink = sum;
    return n;
  }

  static long requests(KeysmithClient c, String name, long end) {
    long n = 0;
    long sum = 0;
    do {
      sum += c.next(name, 1)[0];
      n++;
    } while (System.nanoTime() < end);
    sink = sum;
    return n;
  }

  static long livez(HttpClient http, HttpRequest req, long end) throws Exception {
    long n = 0;
    do {
      HttpResponse<byte[]> r = http.send(req, HttpResponse.BodyHandlers.ofByteArray());
      if (r.statusCode() != 200) {
        throw new IllegalStateException("GET /livez: " + r.statusCode());
      }
      n++;
    } while (System.nanoTime() < end);
    return n;
  }

  /** {@code loop} on {@code threads} threads for {@code seconds}: values per second. */
  static double measure(double seconds, int threads, Loop loop) throws InterruptedException {
    long t0 = System.nanoTime();
    long end = t0 + (long) (seconds * 1e9);
    long[] counts = new long[threads];
    List<Thread> ts = new ArrayList<>();
    RuntimeException[] failed = {null};
    for (int k = 0; k < threads; k++) {
      int me = k;
      Thread t = new Thread(() -> {
        try {
          counts[me] = loop.run(end);
        } catch (RuntimeException e) {
          failed[0] = e;
        }
      });
      ts.add(t);
      t.start();
    }
    for (Thread t : ts) {
      t.join();
    }
    long elapsed = System.nanoTime() - t0;
    if (failed[0] != null) {
      throw failed[0];
    }
    long n = 0;
    for (long c : counts) {
      n += c;
    }
    return n / (elapsed / 1e9);
  }

  static double run(String name, double seconds, int threads, Loop loop) throws InterruptedException {
    measure(Math.min(0.5, seconds), threads, loop); // the JIT
    double v = measure(seconds, threads, loop);
    System.out.printf("%s\t%.0f%n", name, v);
    System.out.flush();
    return v;
  }

  /**
   * The largest count the server's reserve route takes (its --max-count, in /openapi.json), or
   * 100 000 when it says none: the handle's largest lease.
   */
  static long serverMaxCount(String url) {
    try {
      HttpClient http = HttpClient.newHttpClient();
      HttpResponse<byte[]> r = http.send(
          HttpRequest.newBuilder(URI.create(url.replaceAll("/+$", "") + "/openapi.json")).build(),
          HttpResponse.BodyHandlers.ofByteArray());
      for (var p : Json.MAPPER.readTree(r.body()).path("paths").path("/v1/sequences/{name}/reserve")
          .path("post").path("parameters")) {
        if ("count".equals(p.path("name").asText()) && p.path("schema").path("maximum").asLong() > 0) {
          return p.path("schema").path("maximum").asLong();
        }
      }
    } catch (Exception e) {
      // the default below
    }
    return 100_000;
  }

  public static void main(String[] args) throws Exception {
    String url = null;
    String name = null;
    double seconds = 2;
    int threads = 8;
    long maxBlock = 0;
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--url" -> url = args[i + 1];
        case "--sequence" -> name = args[i + 1];
        case "--seconds" -> seconds = Double.parseDouble(args[i + 1]);
        case "--threads" -> threads = Integer.parseInt(args[i + 1]);
        case "--max-block" -> maxBlock = Long.parseLong(args[i + 1]);
        default -> {
          System.err.println("bench: unknown flag " + args[i]);
          System.exit(2);
        }
      }
    }
    if (url == null || name == null || seconds <= 0 || threads < 1 || args.length % 2 != 0) {
      System.err.println("usage: bench.sh --url URL --sequence NAME [--seconds S] [--threads N] [--max-block B]");
      System.exit(2);
    }
    if (maxBlock == 0) {
      maxBlock = serverMaxCount(url);
    }
    String seqName = name;
    AtomicLong counter = new AtomicLong();
    run("bare", seconds, 1, end -> bare(counter, end));
    run("bare_8", seconds, threads, end -> bare(counter, end));
    try (KeysmithClient c = KeysmithClient.of(url)) {
      try (KeysmithSequence seq = c.sequence(name, new KeysmithSequence.Options().block(maxBlock).maxBlock(maxBlock))) {
        seq.next(); // the first lease is not what is measured
        run("next", seconds, 1, end -> next(seq, end));
        run("next_8", seconds, threads, end -> next(seq, end));
        run("next_n100", seconds, 1, end -> nextRange(seq, end));
      }
      try (TimeIdGenerator gen = c.timeIds("bench-" + System.nanoTime())) {
        gen.next();
        run("worker_ids", seconds, 1, end -> ids(gen, end));
      }
      run("request", seconds, 1, end -> requests(c, seqName, end));
    }
    // the client's own HTTP settings
    HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    HttpRequest req = HttpRequest.newBuilder(URI.create(url.replaceAll("/+$", "") + "/livez")).GET().build();
    run("livez", seconds, 1, end -> {
      try {
        return livez(http, req, end);
      } catch (InterruptedException e) {
        throw new IllegalStateException(e);
      } catch (Exception e) {
        throw new IllegalStateException("GET /livez: " + e, e);
      }
    });
  }
}
