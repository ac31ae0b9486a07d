import { spawn } from 'node:child_process';

/** What a command printed and how it ended. */
export interface CommandResult {
  /** Its exit code; null when it could not start or ended on a signal. */
  code: number | null;
  stdout: string;
  stderr: string;
  /** stdout and stderr interleaved as they came (what a failure shows). */
  output: string;
}

/**
 * Runs a command to its end without blocking the event loop, and collects what it prints.
 * `stderr: 'inherit'` passes its stderr through as it comes (the progress of a long build) and
 * collects only stdout. A command that cannot start ends with code null and the error as stderr.
 */
export function runCommand(
  command: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv; stderr?: 'pipe' | 'inherit' } = {},
): Promise<CommandResult> {
  return new Promise((resolve) => {
    const child = spawn(command, args, {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ['ignore', 'pipe', opts.stderr ?? 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let output = '';
    child.stdout?.on('data', (c: Buffer) => {
      stdout += c;
      output += c;
    });
    child.stderr?.on('data', (c: Buffer) => {
      stderr += c;
      output += c;
    });
    child.once('error', (err) =>
      resolve({ code: null, stdout, stderr: stderr + String(err), output: output + String(err) }),
    );
    child.once('close', (code) => resolve({ code, stdout, stderr, output }));
  });
}
