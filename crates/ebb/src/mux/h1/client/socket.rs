//! The socket's side of a connection: reading into the pooled input
//! buffer ([`Conn::read_in`]) and writing what is pending
//! ([`Conn::flush`]: the output buffer, then a body from memory, a file by
//! `sendfile`, or slices made on the fly, each run bounded by
//! [`RUN_QUANTUM`]), with the readiness they learn (`rd_ready`,
//! `wr_ready`).

use std::io::{self, IoSlice};

use super::{Body, Conn, Exchange, In, RUN_QUANTUM};

impl<S: Exchange + Default + 'static> Conn<S> {
    pub(crate) fn has_output(&self) -> bool {
        self.wpos < self.wbuf.len() || self.body.is_some() || self.tr.has_pending_output()
    }

    pub(crate) fn pending_out(&self) -> usize {
        self.wbuf.len() - self.wpos
    }

    /// Reads once into the buffer. Returns whether bytes arrived.
    pub(super) fn read_in(&mut self) -> io::Result<bool> {
        if self.rbuf.is_empty() {
            self.rbuf = self.w.get_buf();
            // Bytes may come: the exchange's variables with them.
            let w = &self.w;
            self.vars
                .unpark(self.sess.peer, self.pp_dst(), || w.take_vars());
        }
        if self.head.headers.capacity() == 0 {
            self.head.headers = self.w.get_head_index();
        }
        if self.rstart == self.rend {
            self.rstart = 0;
            self.rend = 0;
        }
        if self.rend == self.rbuf.len() {
            // Full: make room by moving the unread bytes down, unless a head
            // waiting on the disk still points into them.
            let held = matches!(self.input, In::Stream)
                && self.st.as_ref().is_some_and(|s| s.holds_head());
            if self.rstart == 0 || held {
                return Ok(false);
            }
            self.rbuf.copy_within(self.rstart..self.rend, 0);
            self.rend -= self.rstart;
            self.rstart = 0;
        }
        // (A short read clears `rd_ready`: the socket is drained, the
        // next edge tells when more arrives; with the close reported, a
        // TLS read that took only records without data reads once more.)
        crate::mux::read_once_with(
            &mut self.tr,
            &mut self.rbuf,
            &mut self.rend,
            &mut self.rd_ready,
            self.rd_hup,
            &mut self.eof,
        )
    }

    /// Writes what is pending. Returns whether bytes left.
    pub(super) fn flush(&mut self) -> io::Result<bool> {
        let mut moved = false;
        // The connection closes once this output is out (the pump's
        // close below follows in the same pass): its last write carries
        // the FIN (see [`Transport::write_last`]).
        let ends = self.closing
            && !self.silent
            && self.tr.is_plain()
            && !self.st.as_ref().is_some_and(|s| s.active());
        loop {
            while let (true, Some(Body::Slices(src))) =
                (self.wpos == self.wbuf.len(), &mut self.body)
            {
                // The next slices, once the previous ones left (an encoder
                // may keep a slice's output back).
                if self.sent_run >= RUN_QUANTUM {
                    return Ok(moved);
                }
                self.wbuf.clear();
                self.wpos = 0;
                match src.next_slice(&mut self.wbuf) {
                    Ok(cost) => self.sent_run += cost,
                    Err(_) => {
                        // The promised body cannot be completed.
                        self.closing = true;
                        self.body = None;
                        self.wbuf.clear();
                        return Ok(moved);
                    }
                }
                if src.is_finished() {
                    self.body = None;
                }
            }
            let head = &self.wbuf[self.wpos..];
            let r = match &self.body {
                Some(Body::Mem { file, pos, end }) if !head.is_empty() || pos < end => {
                    let data = file.bytes().unwrap_or(&[]);
                    let b = data.get(*pos..*end).unwrap_or(&[]);
                    let want = head.len() + b.len();
                    let bufs = [IoSlice::new(head), IoSlice::new(b)];
                    if ends {
                        self.tr.write_last(&bufs).map(|n| (n, want, true))
                    } else {
                        self.tr.write_vectored(&bufs).map(|n| (n, want, false))
                    }
                }
                _ if !head.is_empty() && ends && self.body.is_none() => self
                    .tr
                    .write_last(&[IoSlice::new(head)])
                    .map(|n| (n, head.len(), true)),
                _ if !head.is_empty() => self.tr.write(head).map(|n| (n, head.len(), false)),
                Some(Body::Sendfile { file, off, end }) => {
                    let mut o = *off;
                    // sendfile moves up to 1 MiB per call; TLS encrypts one
                    // record (16 KiB) per call, so a short count means a
                    // full socket only against that size.
                    let step = if self.tr.supports_sendfile() {
                        RUN_QUANTUM as u64
                    } else {
                        16 * 1024
                    };
                    let count = (*end - *off).min(step) as usize;
                    let r = self.tr.send_file(file.file(), &mut o, count);
                    match r {
                        Ok(0) => {
                            // The file shrank under us: the promised length
                            // cannot be met, so the connection must end.
                            self.closing = true;
                            self.body = None;
                            self.wbuf.clear();
                            self.wpos = 0;
                            return Ok(moved);
                        }
                        Ok(n) => {
                            if let Some(Body::Sendfile { off, end, .. }) = &mut self.body {
                                *off = o;
                                if *off >= *end {
                                    self.body = None;
                                }
                            }
                            moved = true;
                            self.sent_run += n;
                            if n < count {
                                self.wr_ready = false;
                                return Ok(moved);
                            }
                            if self.sent_run >= RUN_QUANTUM {
                                // Our share of this run is used: the pump
                                // yields and wakes us again.
                                return Ok(moved);
                            }
                            continue;
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            self.wr_ready = false;
                            return Ok(moved);
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e),
                    }
                }
                _ => {
                    // Nothing left (an empty Mem body ends here).
                    if matches!(self.body, Some(Body::Mem { .. })) {
                        self.body = None;
                    }
                    self.wbuf.clear();
                    self.wpos = 0;
                    // TLS records accepted but not yet on the wire.
                    if self.tr.has_pending_output() {
                        match self.tr.flush_pending() {
                            Ok(true) => moved = true,
                            Ok(false) => self.wr_ready = false,
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                                self.wr_ready = false
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    return Ok(moved);
                }
            };
            match r {
                Ok((n, want, last)) => {
                    moved |= n > 0;
                    if last && n == want {
                        self.tr.end_output();
                        self.wr_shut = true;
                    }
                    let hl = self.wbuf.len() - self.wpos;
                    let from_head = n.min(hl);
                    self.wpos += from_head;
                    let rest = n - from_head;
                    if let Some(Body::Mem { pos, end, .. }) = &mut self.body {
                        *pos += rest;
                        if *pos >= *end {
                            self.body = None;
                        }
                    }
                    if self.wpos == self.wbuf.len() {
                        self.wbuf.clear();
                        self.wpos = 0;
                    }
                    if n < want {
                        self.wr_ready = false;
                        return Ok(moved);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.wr_ready = false;
                    return Ok(moved);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}
