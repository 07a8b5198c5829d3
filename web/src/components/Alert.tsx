/** What went wrong, announced to screen readers; nothing when all is well. */
export function Alert({ message }: { message: string | null | undefined }) {
  return message ? (
    <p role="alert" class="error">
      {message}
    </p>
  ) : null;
}
