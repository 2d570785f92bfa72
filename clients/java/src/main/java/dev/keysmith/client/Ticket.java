package dev.keysmith.client;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * A gap-free number held by a ticket ({@link KeysmithClient#takeTicket}): commit it or release it.
 *
 * @param sequence the sequence's name
 * @param value the number as text (its printed form for a formatted sequence)
 * @param ticket the ticket string
 * @param period the period key (20261123), or null
 * @param n the counter within the period
 */
public record Ticket(String sequence, String value, String ticket, Long period, long n) {
  /** The ticket without its ticket string (it commits or releases the number). */
  @Override
  public String toString() {
    return "Ticket[sequence=" + sequence + ", value=" + value + ", period=" + period + ", n=" + n
        + ", ticket=***]";
  }

  static Ticket from(String sequence, JsonNode j) {
    return new Ticket(
        sequence,
        Json.text(j, "value"),
        Json.text(j, "ticket"),
        Json.optLong(j, "period"),
        Json.longOf(j, "n"));
  }
}
