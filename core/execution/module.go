package execution

import (
	"errors"
	"fmt"

	"github.com/ucxx-go/ucxx-go/ucxx"
)

// Module is GPU code (PTX or cubin) loaded on every GPU of a Context.
type Module struct {
	c    *Context
	mods []ucxx.CUDAModule // by GPU number
}

// Kernel is one kernel of a Module, on every GPU of its Context.
type Kernel struct {
	Name string
	fns  []ucxx.CUDAFunction // by GPU number
}

// LoadModule loads image (PTX, compiled for each device by the driver, or a cubin) on
// every GPU of the context. Close unloads it.
//
// Errors: ErrClosed, ErrNoGPU, a *ucxx.CUDAError (CUDA_ERROR_INVALID_PTX, ...).
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(c.gpus) == 0 {
		return nil, ErrNoGPU
	}
	m := &Module{c: c}
	for _, l := range c.gpus {
		var mod ucxx.CUDAModule
		err := l.cu.Use(func() (err error) { mod, err = c.drv.LoadModule(image); return err })
		if err != nil {
			m.unload()
			return nil, err
		}
		m.mods = append(m.mods, mod)
		c.res.modules.Add(1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		m.unload()
		return nil, ErrClosed
	}
	c.modules = append(c.modules, m)
	return m, nil
}

// Kernel returns the module's kernel called name.
//
// Errors: a *ucxx.CUDAError (CUDA_ERROR_NOT_FOUND) naming the kernel.
func (m *Module) Kernel(name string) (*Kernel, error) {
	k := &Kernel{Name: name}
	for _, mod := range m.mods {
		f, err := mod.Function(name)
		if err != nil {
			return nil, fmt.Errorf("execution: kernel %q: %w", name, err)
		}
		k.fns = append(k.fns, f)
	}
	return k, nil
}

// unload unloads the module from every GPU it was loaded on.
func (m *Module) unload() error {
	var errs []error
	for i, mod := range m.mods {
		l := m.c.gpus[i]
		errs = append(errs, l.cu.Use(func() error { return mod.Unload() }))
		m.c.res.modules.Add(-1)
	}
	m.mods = nil
	return errors.Join(errs...)
}
