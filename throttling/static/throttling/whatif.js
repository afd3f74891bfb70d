/* "What would this do?" on the policy page: sends the form as it is (unsaved) to the replay view, shows
   the answer, follows a background replay until it is done, and copies a suggestion into the form.
   Every word shown comes from the page itself (translated there). */
(function () {
    'use strict';

    function setField(id, value) {
        const input = document.getElementById(id);
        if (!input) return false;
        input.value = value;
        input.dispatchEvent(new Event('change', {bubbles: true}));
        return true;
    }

    function init() {
        const panel = document.getElementById('throttling-whatif');
        if (!panel) return;
        const form = panel.closest('form');
        const result = panel.querySelector('.whatif-result');
        let timer = null;
        let asked = 0;  // answers to an earlier click are dropped

        function show(html, ask) {
            if (ask !== asked) return;
            result.innerHTML = html;
            const job = result.querySelector('[data-job-url]');
            if (job) timer = setTimeout(function () { poll(job.dataset.jobUrl, ask); }, 1000);
        }

        function failed(status, ask) {
            if (ask !== asked) return;
            const note = document.createElement('p');
            note.className = 'errornote whatif-error';
            note.textContent = panel.dataset.failed + (status ? ' (' + status + ')' : '');
            result.replaceChildren(note);
        }

        function answer(response) {
            return response.ok ? response.text() : Promise.reject(response.status);
        }

        function poll(url, ask) {
            fetch(url, {credentials: 'same-origin'}).then(answer)
                .then(function (html) { show(html, ask); }, function (status) { failed(status, ask); });
        }

        panel.querySelectorAll('button[data-days]').forEach(function (button) {
            button.addEventListener('click', function () {
                clearTimeout(timer);
                const ask = ++asked;
                const data = new FormData(form);
                data.set('days', button.dataset.days);
                const busy = document.createElement('p');
                busy.className = 'whatif-busy';
                busy.textContent = panel.dataset.busy;
                result.replaceChildren(busy);
                fetch(panel.dataset.url, {method: 'POST', body: data, credentials: 'same-origin'}).then(answer)
                    .then(function (html) { show(html, ask); }, function (status) { failed(status, ask); });
            });
        });

        result.addEventListener('click', function (event) {
            const button = event.target.closest('button.whatif-apply');
            if (!button) return;
            apply(JSON.parse(button.dataset.windows), button.dataset.algorithm);
            const said = result.querySelector('.whatif-applied');
            if (said) said.textContent = button.dataset.done;
        });
    }

    // The main limit takes the first window; the extra windows' rows take the others, in order.
    // Rows left over are emptied (a new row) or marked for deletion (a saved one); rows missing are
    // added with the inline's own "Add another" link, so Django's formset counts them.
    function apply(windows, algorithm) {
        const main = windows[0], extra = windows.slice(1);
        setField('id_period', main.text);
        setField('id_max_count', main.max);
        if (algorithm) setField('id_algorithm', algorithm);
        const total = document.getElementById('id_windows-TOTAL_FORMS');
        if (!total) return;
        let used = 0;
        for (let i = 0; i < Number(total.value); i++) {
            if (!document.getElementById('id_windows-' + i + '-period')) continue;
            const remove = document.getElementById('id_windows-' + i + '-DELETE');
            if (used < extra.length) {
                setField('id_windows-' + i + '-period', extra[used].text);
                setField('id_windows-' + i + '-max_count', extra[used].max);
                if (remove) remove.checked = false;
                used++;
            } else if (remove) {
                remove.checked = true;
            } else {
                setField('id_windows-' + i + '-period', '');
                setField('id_windows-' + i + '-max_count', '');
            }
        }
        const add = document.querySelector('#windows-group .add-row a');
        while (used < extra.length && add) {
            add.click();
            const i = Number(total.value) - 1;
            setField('id_windows-' + i + '-period', extra[used].text);
            setField('id_windows-' + i + '-max_count', extra[used].max);
            used++;
        }
    }

    if (document.readyState === 'loading') {
        document.addEventListener('DOMContentLoaded', init);
    } else {
        init();
    }
}());
