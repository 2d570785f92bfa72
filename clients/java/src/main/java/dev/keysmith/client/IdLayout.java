package dev.keysmith.client;

/**
 * How a time-ordered id's bits are split, as the server's {@code keysmith ids layout}: {@code
 * time << (workerBits + sequenceBits) | worker << sequenceBits | sequence}, the time in units of
 * {@code unitMs} since {@code epochMs}. Ids of one group must all use one layout.
 *
 * @param timeBits bits of time
 * @param workerBits bits of worker id ({@code 2^workerBits} workers)
 * @param sequenceBits bits of sequence (ids per time unit and worker)
 * @param unitMs milliseconds per time unit
 * @param epochMs time zero, ms since 1970
 */
public record IdLayout(int timeBits, int workerBits, int sequenceBits, long unitMs, long epochMs) {
  /** 2024-01-01T00:00:00Z, the presets' epoch. */
  public static final long DEFAULT_EPOCH_MS = 1_704_067_200_000L;

  /** The server's default: 41 time bits of 1 ms, 10 worker bits, 12 sequence bits. */
  public static final IdLayout SNOWFLAKE = new IdLayout(41, 10, 12, 1, DEFAULT_EPOCH_MS);

  /** Ids below 2^53: 37 time bits of 10 ms, 8 worker bits, 8 sequence bits. */
  public static final IdLayout JS_SAFE = new IdLayout(37, 8, 8, 10, DEFAULT_EPOCH_MS);

  /**
   * Checks the bits.
   *
   * @throws IllegalArgumentException when the bits do not add up to at most 63, or a part is empty
   */
  public IdLayout {
    if (timeBits < 1 || workerBits < 0 || sequenceBits < 0 || timeBits + workerBits + sequenceBits > 63) {
      throw new IllegalArgumentException(
          "keysmith: an id layout needs timeBits >= 1 and timeBits + workerBits + sequenceBits <= 63, got "
              + timeBits + "/" + workerBits + "/" + sequenceBits);
    }
    if (unitMs < 1) {
      throw new IllegalArgumentException("keysmith: unitMs must be at least 1, got " + unitMs);
    }
  }

  /** How many worker ids the layout holds. */
  public long workers() {
    return 1L << workerBits;
  }

  /** The worker id of an id of this layout. */
  public long worker(long id) {
    return (id >>> sequenceBits) & (workers() - 1);
  }

  /** The start of an id's time unit, ms since 1970. */
  public long timeMs(long id) {
    return (id >>> (workerBits + sequenceBits)) * unitMs + epochMs;
  }

  /** The sequence within the time unit of an id. */
  public long sequence(long id) {
    return id & ((1L << sequenceBits) - 1);
  }
}
