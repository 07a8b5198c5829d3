import { errorText, type Schemas } from "../api/client";
import { Status } from "../components/Status";
import { TableHead } from "../components/TableHead";
import { useSession } from "../context";
import { usePoll } from "../lib/poll";
import { duration, ms, when } from "../lib/time";
import { Alert } from "../components/Alert";

type Fleet = Schemas["ProvisionerFleet"];

/** Each provisioner's fleet: demand per label set, its instances and their intents. */
export function FleetPage() {
  const { api, credentials } = useSession();
  const ws = credentials.workspace;
  const fleets = usePoll<Fleet[]>(
    async () => {
      const list = await api.GET("/v1/workspaces/{ws}/provisioners", { params: { path: { ws } } });
      if (!list.data) return { error: errorText(list.error, list.response) };
      const reads = await Promise.all(
        list.data.items.map((p) => api.GET("/v1/workspaces/{ws}/provisioners/{id}", { params: { path: { ws, id: p.id } } })),
      );
      const failed = reads.find((r) => !r.data);
      if (failed) return { error: errorText(failed.error, failed.response) };
      return { data: reads.flatMap((r) => (r.data ? [r.data] : [])) };
    },
    2000,
    [ws],
  );
  const now = Date.now();
  return (
    <section>
      <h1>Fleet</h1>
      <Alert message={fleets.error} />
      {fleets.data && fleets.data.length === 0 && <p class="muted">No provisioner in this workspace.</p>}
      {(fleets.data ?? []).map(({ provisioner: p, label_sets, instances, ended_instances }) => (
        <section class="provisioner" data-provisioner={p.name} aria-labelledby={`prov-${p.id}`}>
          <h2 id={`prov-${p.id}`}>{p.name}</h2>
          <p class="muted">
            <span data-testid="instances-now">{p.reserved_instances}</span> of at most {p.max_instances} instances held now · {p.jobs_per_instance} job(s) an
            instance · {p.warm} warm · idle timeout {p.idle_timeout_s} s · created {when(p.created_at)}
          </p>
          <table>
            <caption class="visually-hidden">Demand by label set</caption>
            <TableHead columns={["Label set", "Queued", "Reserved", "Running", "Idle runners", "Oldest queued"]} />
            <tbody>
              {label_sets.map((set) => (
                <tr data-labels={set.labels.join(",")}>
                  <td>{set.labels.join(", ")}</td>
                  <td>{set.queued}</td>
                  <td>{set.reserved}</td>
                  <td>{set.running}</td>
                  <td>{set.idle_sessions}</td>
                  <td>{set.oldest_queued_at ? `${duration(ms(set.oldest_queued_at, null, now))} ago` : "—"}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <table>
            <caption class="visually-hidden">Instances</caption>
            <TableHead columns={["Instance", "State", "Terminate intent", "First seen"]} />
            <tbody>
              {instances.map((i) => (
                <tr data-instance={i.provider_runner_id}>
                  <td>{i.provider_runner_id}</td>
                  <td>
                    <Status status={i.state} />
                  </td>
                  <td>{i.terminate ? `${i.terminate.reason.replace(/-/g, " ")} (${when(i.terminate.at)})` : "—"}</td>
                  <td>{when(i.first_seen_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          <p class="muted">
            {instances.length} live instance(s){ended_instances ? `, ${ended_instances} ended` : ""}.
          </p>
        </section>
      ))}
    </section>
  );
}
