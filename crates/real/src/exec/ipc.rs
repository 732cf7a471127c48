//! The executor's ops of one kind: ports and pipes: a call, a serve and its
//! reply through the shared memory, pipe reads and writes.

use super::*;

impl Task<'_> {
    pub(super) fn ipc(&mut self, op: Instr) -> Result<(), String> {
        let (me, objs) = (self.me, &self.objs);
        let run: &Run = self.run;
        let shm = &self.run.shm;
        match op {
            Instr::Call { port, bytes } => {
                shm.put(me, bytes_of(&mut self.buf, bytes));
                objs.call(port.index(), bytes, me);
                let n = shm.slot(me, slot::REPLY_BYTES).load(Acquire) as u64;
                shm.get(me, bytes_of(&mut self.buf, n));
            }
            Instr::Serve(port) => {
                let c = objs.serve(port.index(), me);
                let n = shm.slot(c, slot::REQ_BYTES).load(Acquire) as u64;
                shm.get(c, bytes_of(&mut self.buf, n));
                self.serving = Some(c);
            }
            Instr::Reply { bytes } => {
                let c = self
                    .serving
                    .take()
                    .ok_or("reply with no request being served")?;
                shm.put(c, bytes_of(&mut self.buf, bytes));
                shm.slot(c, slot::REPLY_BYTES).store(bytes as u32, Relaxed);
                objs.post(c);
            }
            Instr::PipeWrite { pipe, bytes } => {
                let fd = run.pipes[pipe.index()].1;
                objs.kernel_wait(me, run.kinds.total + pipe.index());
                sys::write_all(fd, bytes_of(&mut self.buf, bytes))
                    .map_err(|e| format!("pipe write: {e}"))?;
                objs.running(me);
            }
            Instr::PipeRead { pipe, bytes } => {
                let fd = run.pipes[pipe.index()].0;
                objs.kernel_wait(me, run.kinds.total + pipe.index());
                if !sys::read_exact(fd, bytes_of(&mut self.buf, bytes))
                    .map_err(|e| format!("pipe read: {e}"))?
                {
                    return Err("pipe read: end of file".into());
                }
                self.objs.running(me);
            }
            other => unreachable!("{other:?} is not a ipc op"),
        }
        Ok(())
    }
}
