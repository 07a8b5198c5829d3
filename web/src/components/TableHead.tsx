/**
 * A table's column headers. `hidden` heads a last column of buttons: screen
 * readers hear its name, sighted readers see the buttons say what they do.
 */
export function TableHead({ columns, hidden }: { columns: string[]; hidden?: string }) {
  return (
    <thead>
      <tr>
        {columns.map((column) => (
          <th scope="col">{column}</th>
        ))}
        {hidden && (
          <th scope="col">
            <span class="visually-hidden">{hidden}</span>
          </th>
        )}
      </tr>
    </thead>
  );
}
