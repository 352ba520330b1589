/**
 * Counters and gauges, exposed on `/_wasmkeep/metrics` in the Prometheus
 * text format.
 *
 * @module
 */

/** Label names and values of one series. */
export type Labels = Record<string, string>;

interface Family {
  name: string;
  help: string;
  type: "counter" | "gauge";
  series: Map<string, { labels: Labels; value: number | (() => number) }>;
}

function labelKey(labels: Labels): string {
  return Object.entries(labels).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${v}`)
    .join(",");
}

function escapeLabel(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll("\n", "\\n").replaceAll('"', '\\"');
}

/**
 * The node's metrics.
 *
 * @example
 * ```ts
 * import { MetricsRegistry } from "./registry.ts";
 * const metrics = new MetricsRegistry();
 * metrics.counter("wasmkeep_events_total", "Events run.", { outcome: "ok" });
 * metrics.render(); // "# HELP wasmkeep_events_total Events run.\n..."
 * ```
 */
export class MetricsRegistry {
  readonly #families = new Map<string, Family>();

  #family(name: string, help: string, type: Family["type"]): Family {
    let family = this.#families.get(name);
    if (!family) {
      family = { name, help, type, series: new Map() };
      this.#families.set(name, family);
    }
    return family;
  }

  /** Adds `by` (default 1) to a counter. */
  counter(name: string, help: string, labels: Labels = {}, by = 1): void {
    const family = this.#family(name, help, "counter");
    const key = labelKey(labels);
    const series = family.series.get(key);
    if (series && typeof series.value === "number") series.value += by;
    else family.series.set(key, { labels, value: by });
  }

  /**
   * A counter series bound once, for hot paths: each call adds `by`
   * (default 1) without looking the series up again.
   */
  boundCounter(name: string, help: string, labels: Labels = {}): (by?: number) => void {
    const family = this.#family(name, help, "counter");
    const key = labelKey(labels);
    let series = family.series.get(key);
    if (!series) {
      series = { labels, value: 0 };
      family.series.set(key, series);
    }
    const bound = series;
    return (by = 1) => {
      bound.value = (bound.value as number) + by;
    };
  }

  /** Makes a gauge read `read()` whenever the metrics are rendered. */
  gauge(name: string, help: string, read: () => number, labels: Labels = {}): void {
    this.#family(name, help, "gauge").series.set(labelKey(labels), { labels, value: read });
  }

  /** The current value of a series, for tests and logs. */
  value(name: string, labels: Labels = {}): number | undefined {
    const series = this.#families.get(name)?.series.get(labelKey(labels));
    if (!series) return undefined;
    return typeof series.value === "number" ? series.value : series.value();
  }

  /** All metrics in the Prometheus text format. */
  render(): string {
    const lines: string[] = [];
    for (const family of this.#families.values()) {
      lines.push(`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`);
      for (const { labels, value } of family.series.values()) {
        const entries = Object.entries(labels);
        const labelText = entries.length === 0
          ? ""
          : `{${entries.map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(",")}}`;
        lines.push(`${family.name}${labelText} ${typeof value === "number" ? value : value()}`);
      }
    }
    return lines.join("\n") + "\n";
  }
}
