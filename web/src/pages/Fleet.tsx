import { errorText, type Schemas } from "../api/client";
import { useSession } from "../context";
import { usePoll } from "../lib/poll";
import { when } from "../lib/time";

/** The workspace's provisioners and the instance slots each holds now. */
export function FleetPage() {
  const { api, credentials } = useSession();
  const ws = credentials.workspace;
  const provisioners = usePoll<Schemas["ProvisionerList"]>(
    async () => {
      const { data, error, response } = await api.GET("/v1/workspaces/{ws}/provisioners", { params: { path: { ws } } });
      return data ? { data } : { error: errorText(error, response) };
    },
    2000,
    [ws],
  );
  const items = provisioners.data?.items ?? [];
  return (
    <section>
      <h1>Fleet</h1>
      {provisioners.error && (
        <p role="alert" class="error">
          {provisioners.error}
        </p>
      )}
      <table class="fleet">
        <caption class="visually-hidden">Provisioners</caption>
        <thead>
          <tr>
            <th scope="col">Provisioner</th>
            <th scope="col">Label sets</th>
            <th scope="col">Instances now</th>
            <th scope="col">At most</th>
            <th scope="col">Jobs an instance</th>
            <th scope="col">Warm</th>
            <th scope="col">Idle timeout</th>
            <th scope="col">Created</th>
          </tr>
        </thead>
        <tbody>
          {items.map((p) => (
            <tr data-provisioner={p.name}>
              <td>{p.name}</td>
              <td>{p.label_sets.map((set) => set.join(", ")).join(" · ")}</td>
              <td data-testid="instances-now">{p.reserved_instances}</td>
              <td>{p.max_instances}</td>
              <td>{p.jobs_per_instance}</td>
              <td>{p.warm}</td>
              <td>{p.idle_timeout_s} s</td>
              <td>{when(p.created_at)}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {provisioners.data && items.length === 0 && <p class="muted">No provisioner in this workspace.</p>}
    </section>
  );
}
